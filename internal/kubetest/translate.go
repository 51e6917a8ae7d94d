//go:build linux

package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// The kubelet's streaming server speaks WebSocket only up to v4, which cannot
// tell the command that stdin ended. Like the real API server, this one
// answers a client asking for v5 itself and carries the exec on to the
// kubelet over SPDY.
const protocolV5 = "v5.channel.k8s.io"

// Channel numbers of the remote command protocol.
const (
	chanStdin = iota
	chanStdout
	chanStderr
	chanError
	chanResize
)

// wantsTranslation reports whether r is a WebSocket request offering v5.
func wantsTranslation(r *http.Request) bool {
	return wsstream.IsWebSocketRequestWithStreamCloseProtocol(r)
}

// translate serves a v5 WebSocket exec to the client and runs it on the
// kubelet's exec URL target with client-go's SPDY executor. ctx ends the exec.
func (s *Server) translate(ctx context.Context, w http.ResponseWriter, r *http.Request, target *url.URL, req *runtimeapi.ExecRequest) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	channel := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		chanStdin:  channel(req.Stdin, wsstream.ReadChannel),
		chanStdout: channel(req.Stdout, wsstream.WriteChannel),
		chanStderr: channel(req.Stderr, wsstream.WriteChannel),
		chanError:  wsstream.WriteChannel,
		chanResize: channel(req.Tty, wsstream.ReadChannel),
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		protocolV5: {Binary: true, Channels: channels},
	})
	// The client going away must end the command: watch the hijacked
	// connection's reads, which the WebSocket server does all the time.
	_, streams, err := conn.Open(&hijackWatch{ResponseWriter: w, gone: cancel}, r)
	if err != nil {
		return // the WebSocket server has answered the client
	}
	defer conn.Close()
	// An empty first message tells the client the exec is set up.
	switch {
	case req.Stdout:
		_, _ = streams[chanStdout].Write(nil)
	case req.Stderr:
		_, _ = streams[chanStderr].Write(nil)
	default:
		_, _ = streams[chanError].Write(nil)
	}

	opts := remotecommand.StreamOptions{Tty: req.Tty}
	if req.Stdin {
		opts.Stdin = streams[chanStdin]
	}
	if req.Stdout {
		opts.Stdout = streams[chanStdout]
	}
	if req.Stderr {
		opts.Stderr = streams[chanStderr]
	}
	if req.Tty {
		q := &sizeQueue{dec: json.NewDecoder(streams[chanResize]), done: ctx.Done()}
		opts.TerminalSizeQueue = q
	}

	var execErr error
	executor, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: s.streamURL.String()}, http.MethodPost, target)
	if err == nil {
		execErr = executor.StreamWithContext(ctx, opts)
	} else {
		execErr = err
	}
	_ = writeExitStatus(streams[chanError], execErr)
}

// writeExitStatus writes the v4/v5 status of an exec's end: success, a
// non-zero exit code, or the failure's message.
func writeExitStatus(w io.Writer, execErr error) error {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	var ee exec.CodeExitError
	switch {
	case execErr == nil:
	case errors.As(execErr, &ee):
		st.Status = metav1.StatusFailure
		st.Reason = "NonZeroExitCode"
		st.Message = fmt.Sprintf("command terminated with non-zero exit code: %v", ee)
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: fmt.Sprint(ee.Code)}}}
	default:
		// The kubelet's error already reads as the API server's; pass it on as is.
		st.Status = metav1.StatusFailure
		st.Reason = metav1.StatusReasonInternalError
		st.Code = http.StatusInternalServerError
		st.Message = execErr.Error()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// sizeQueue reads the client's resize events (JSON sizes) for the SPDY side.
type sizeQueue struct {
	dec  *json.Decoder
	done <-chan struct{}
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	var size remotecommand.TerminalSize
	if err := q.dec.Decode(&size); err != nil {
		return nil
	}
	select {
	case <-q.done:
		return nil
	default:
	}
	return &size
}

// hijackWatch hands the WebSocket server a connection whose failed read
// (the client closed or vanished) calls gone.
type hijackWatch struct {
	http.ResponseWriter
	gone func()
}

func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := &watchedConn{Conn: c, gone: h.gone}
	// The WebSocket server reads through rw: keep the bytes already buffered,
	// then read from the watched connection.
	buffered, _ := rw.Reader.Peek(rw.Reader.Buffered())
	rw.Reader = bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), wc))
	return wc, rw, nil
}

type watchedConn struct {
	net.Conn
	once sync.Once
	gone func()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(c.gone)
	}
	return n, err
}
