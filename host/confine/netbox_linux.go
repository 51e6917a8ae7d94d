package confine

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// listenProxy opens the proxy's listeners in the calling thread's network
// namespace: on 127.0.0.1, and on ::1 where there is one.
func listenProxy() (proxyListeners, error) {
	var l proxyListeners
	for _, host := range []string{"127.0.0.1", "::1"} {
		network := "tcp4"
		if host == "::1" {
			network = "tcp6"
		}
		h, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(proxyHTTPPort)))
		if err != nil && host == "::1" {
			break // a kernel without IPv6: 127.0.0.1 is what the variables name
		}
		if err != nil {
			return l, err
		}
		s, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(proxySOCKSPort)))
		if err != nil {
			h.Close()
			l.close()
			return proxyListeners{}, err
		}
		l.http, l.socks = append(l.http, h), append(l.socks, s)
	}
	return l, nil
}

// listenIn opens the proxy's listeners in the network namespace netns
// (an fd), from a thread that enters it and is then left to die.
func listenIn(netns int) (proxyListeners, error) {
	var l proxyListeners
	var err error
	onOwnThread(func() {
		if err = unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			err = fmt.Errorf("enter the network namespace: %w", err)
			return
		}
		l, err = listenProxy()
	})
	return l, err
}

// proxyListenersOf are the proxy's listeners in the network namespace of
// the landlock runner's confinement c.
func proxyListenersOf(c confinement) (proxyListeners, error) {
	lc, ok := c.(*Confinement)
	if !ok || lc.ns == nil || lc.ns.net < 0 {
		return proxyListeners{}, errors.New("the confinement has no network namespace of its own")
	}
	return listenIn(lc.ns.net)
}

// newProxyNS makes a network namespace holding only its loopback (up),
// with the proxy's listeners in it: the bubblewrap runner's.
func newProxyNS() (int, proxyListeners, error) {
	fd := -1
	var l proxyListeners
	var err error
	onOwnThread(func() {
		if fd, err = newNetNS(); err != nil {
			return
		}
		if l, err = listenProxy(); err != nil {
			unix.Close(fd)
			fd = -1
		}
	})
	return fd, l, err
}

// bwrapNet is the bubblewrap runner's confinement of a proxied policy:
// the thread that forks bwrap enters the namespace the host made (and
// serves the proxy in), so bwrap, asked for no namespace of its own
// (no --unshare-net), runs the command there; and it gets the socket
// rule unless the policy names unix sockets. The namespace is owned by
// the host's user namespace: bwrap's own user namespace holds no
// capability over it.
type bwrapNet struct {
	netns int
	rule  confinement // nil: the policy names unix sockets
}

func (b *bwrapNet) Confine() error {
	if err := unix.Setns(b.netns, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("network namespace: setns: %w", err)
	}
	if b.rule != nil {
		return b.rule.Confine()
	}
	return nil
}

func (b *bwrapNet) Stale() bool  { return false }
func (b *bwrapNet) Close() error { return unix.Close(b.netns) }

// newBwrapNet is the namespace and listeners of a proxied policy under
// the bubblewrap runner; withRule adds the socket rule.
func newBwrapNet(withRule bool) (confinement, proxyListeners, error) {
	b := &bwrapNet{netns: -1}
	if withRule {
		rule, err := newSocketRule()
		if err != nil {
			return nil, proxyListeners{}, err
		}
		b.rule = rule
	}
	fd, l, err := newProxyNS()
	if err != nil {
		return nil, l, fmt.Errorf("network namespace of the proxy: %w", err)
	}
	b.netns = fd
	return b, l, nil
}
