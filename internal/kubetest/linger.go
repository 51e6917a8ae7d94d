//go:build linux

package kubetest

import (
	"io"
	"net"
	"sync"
	"time"
)

// lingerFor bounds how long a closed connection waits for its peer to close
// too.
const lingerFor = 30 * time.Second

// lingerListener hands out connections whose Close does not destroy output
// the peer has yet to read. A socket closed while its peer still sends gets
// those bytes answered with a reset, and a reset makes the peer's kernel drop
// what it had received but not read. client-go's exec clients send a
// heartbeat every 5 s, so a client still reading a command's last output
// (and its exit status) when the server closes, as a slow or loaded one is,
// would lose that output: the kubelet's streaming server and the API
// server's proxies close a connection as soon as their last write is
// queued. Close here sends end of stream instead, then reads and drops what
// the peer still sends until the peer closes too (or lingerFor has passed),
// and only then closes the socket, as net/http does for its own responses.
type lingerListener struct {
	net.Listener

	mu        sync.Mutex
	lingering map[*lingerConn]struct{}
	stopped   bool
	drains    sync.WaitGroup
}

func newLingerListener(ln net.Listener) *lingerListener {
	return &lingerListener{Listener: ln, lingering: map[*lingerConn]struct{}{}}
}

func (l *lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	return &lingerConn{TCPConn: tc, l: l}, nil
}

// stop closes the connections still lingering and waits for their readers:
// the server is going away, so peers that never close are cut.
func (l *lingerListener) stop() {
	l.mu.Lock()
	l.stopped = true
	for c := range l.lingering {
		_ = c.TCPConn.Close()
	}
	l.mu.Unlock()
	l.drains.Wait()
}

type lingerConn struct {
	*net.TCPConn
	l      *lingerListener
	once   sync.Once
	closed sync.Mutex // held while checking or setting isDone
	isDone bool
}

// Read fails once Close has been called, as on a closed socket: what the
// peer sends from then on is the lingering reader's to drop.
func (c *lingerConn) Read(p []byte) (int, error) {
	c.closed.Lock()
	done := c.isDone
	c.closed.Unlock()
	if done {
		return 0, net.ErrClosed
	}
	return c.TCPConn.Read(p)
}

func (c *lingerConn) Close() error {
	c.once.Do(func() {
		c.closed.Lock()
		c.isDone = true
		c.closed.Unlock()
		l := c.l
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			_ = c.TCPConn.Close()
			return
		}
		if err := c.TCPConn.CloseWrite(); err != nil {
			l.mu.Unlock()
			_ = c.TCPConn.Close()
			return
		}
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(lingerFor))
		l.lingering[c] = struct{}{}
		l.drains.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.drains.Done()
			_, _ = io.Copy(io.Discard, c.TCPConn)
			l.mu.Lock()
			delete(l.lingering, c)
			l.mu.Unlock()
			_ = c.TCPConn.Close()
		}()
	})
	return nil
}
