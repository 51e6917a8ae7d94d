//go:build !linux

package confine

import "errors"

func proxyListenersOf(confinement) (proxyListeners, error) {
	return proxyListeners{}, errors.New("confining a command needs Linux")
}

func newBwrapNet(bool) (confinement, proxyListeners, error) {
	return nil, proxyListeners{}, errors.New("confining a command needs Linux")
}
