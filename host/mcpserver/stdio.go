package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/sdk"
)

// MaxFrame is the largest message the front end accepts, on stdio and
// over HTTP: the largest request every host-plugin hop carries
// (sdk.MaxRequest), and so the longest command.
const MaxFrame = sdk.MaxRequest

// headSize is how much of an oversized line is kept to read its id from.
const headSize = 1 << 10

// maxDepth is how deeply a message may nest objects and arrays: the go-sdk
// refuses anything deeper when it decodes, so the transport answers such a
// message itself instead of letting the decoder fail.
const maxDepth = 1000

// StdioTransport is MCP over newline-delimited JSON on a pair of streams.
// Unlike the go-sdk's IOTransport, which ends the session at the first
// frame it cannot decode, it answers a bad line with the JSON-RPC error
// that fits (parse error, invalid request, oversized message) and keeps
// serving; and it never sends the response to a request the client has
// cancelled (notifications/cancelled), which the go-sdk would send once
// the handler returns.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxFrame bounds one message; 0 means MaxFrame (16 MiB).
	MaxFrame int
	Logger   hclog.Logger
}

var _ mcp.Transport = (*StdioTransport)(nil)

// Connect starts reading. It is called once, by the go-sdk.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.MaxFrame
	if limit <= 0 {
		limit = MaxFrame
	}
	log := t.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	c := &stdioConn{
		w:         t.Writer,
		log:       log,
		max:       limit,
		frames:    make(chan frame),
		closed:    make(chan struct{}),
		inflight:  map[jsonrpc.ID]bool{},
		cancelled: map[jsonrpc.ID]bool{},
	}
	// Reads happen in their own goroutine so that Close can end a Read that
	// waits on a stream which cannot be interrupted (a blocking stdin).
	go c.readLoop(&frameReader{br: bufio.NewReaderSize(t.Reader, 64<<10), max: limit})
	return c, nil
}

type frame struct {
	line    []byte // of a line too long, its first headSize bytes
	tooLong bool
	err     error
}

type stdioConn struct {
	log    hclog.Logger
	max    int
	frames chan frame

	closeOnce sync.Once
	closed    chan struct{}

	// wmu serializes every write (the go-sdk's and the transport's own error
	// replies) so lines never interleave, and guards the request books.
	wmu       sync.Mutex
	w         io.Writer
	inflight  map[jsonrpc.ID]bool // requests read and not yet answered
	cancelled map[jsonrpc.ID]bool // of those, the ones the client cancelled
}

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) readLoop(fr *frameReader) {
	for {
		line, tooLong, err := fr.next()
		select {
		case c.frames <- frame{line: line, tooLong: tooLong, err: err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read returns the next well-formed message; bad lines are answered here
// and skipped.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var f frame
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case f = <-c.frames:
		}
		if f.err != nil {
			if errors.Is(f.err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("read from the client: %w", f.err)
		}
		if f.tooLong {
			c.reject(tooLarge(f.line, c.max))
			continue
		}
		line := bytes.TrimSpace(f.line)
		if len(line) == 0 {
			continue
		}
		msg, reply := decodeFrame(line)
		if reply != nil {
			c.reject(reply)
			continue
		}
		if msg == nil {
			continue
		}
		pass, reply := c.track(msg)
		if reply != nil {
			c.reject(reply)
		}
		if !pass {
			continue
		}
		return rewriteTaskRequest(msg), nil
	}
}

// track keeps the books that let Write drop the response to a cancelled
// request, and says whether msg goes on to the go-sdk, or the reply that
// answers it instead. A cancellation of a request already answered (or
// never seen) is dropped here: the go-sdk acts on cancellations
// asynchronously, and a stale one could otherwise cancel a later request
// that reuses the id. A request whose id is still in flight is answered
// here: the go-sdk would drop it without a word, leaving its caller
// waiting.
func (c *stdioConn) track(msg jsonrpc.Message) (pass bool, reply []byte) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return true, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if req.IsCall() {
		if c.inflight[req.ID] {
			id, _ := json.Marshal(req.ID.Raw())
			return false, oneReply(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: id %s is in use by a request still in flight; use an id of its own", id))
		}
		c.inflight[req.ID] = true
		return true, nil
	}
	if req.Method != "notifications/cancelled" {
		return true, nil
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return true, nil // the go-sdk says what is wrong with it
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !c.inflight[id] {
		c.log.Debug("ignored the cancellation of a request not in flight", "id", p.RequestID)
		return false, nil
	}
	c.cancelled[id] = true
	return true, nil
}

// Write sends one message as one line. The response to a request the
// client cancelled is dropped: the client has stopped waiting for it.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode a message for the client: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		drop := c.cancelled[resp.ID]
		delete(c.inflight, resp.ID)
		delete(c.cancelled, resp.ID)
		if drop {
			c.log.Debug("dropped the response to a cancelled request", "id", resp.ID.Raw())
			return nil
		}
	}
	return c.writeLocked(data)
}

func (c *stdioConn) writeLocked(data []byte) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	if _, err := c.w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("write to the client: %w", err)
	}
	return nil
}

// reject sends the transport's own answer to a bad line.
func (c *stdioConn) reject(reply []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.log.Debug("answered a malformed message", "reply", string(reply))
	if err := c.writeLocked(reply); err != nil {
		// The go-sdk notices a broken stream on its own next write.
		c.log.Debug("answer to a malformed message not sent", "error", err)
	}
}

// Close ends the connection; a pending Read returns io.EOF. The streams
// are not closed: they are the process's.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// frameReader splits a stream into lines of at most max bytes. A longer
// line is read to its end and reported as too long, with its first
// headSize bytes, so the next line starts clean.
type frameReader struct {
	br  *bufio.Reader
	max int
}

func (r *frameReader) next() (line []byte, tooLong bool, err error) {
	size := 0 // bytes of this line so far, without its newline
	for {
		chunk, err := r.br.ReadSlice('\n')
		if err == nil {
			size += len(chunk) - 1
		} else {
			size += len(chunk)
		}
		switch {
		case tooLong:
		case size > r.max:
			tooLong = true
			if len(line) < headSize {
				line = append(line, chunk[:min(len(chunk), headSize-len(line))]...)
			}
			line = append([]byte(nil), line[:min(len(line), headSize)]...)
		default:
			line = append(line, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil:
			return line, tooLong, nil
		case errors.Is(err, io.EOF) && (size > 0 || tooLong):
			// A last message without its newline still counts.
			return line, tooLong, nil
		default:
			return nil, false, err
		}
	}
}

// tooLarge answers a message over limit bytes, whose first bytes are head.
func tooLarge(head []byte, limit int) []byte {
	return oneReply(leadingID(head), jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: message larger than %d bytes", limit))
}

// leadingID is the id of a message of which head is the start, if the id
// comes before any member that head cuts (clients put it early:
// {"jsonrpc":"2.0","id":7,"method":...}), else nil.
func leadingID(head []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			id, ok := checkID(v)
			if !ok {
				return nil
			}
			return id
		}
	}
	return nil
}

// envelope is a message's members as sent, to judge it before decoding.
type envelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// decodeFrame turns one line into a message, or into the reply the line
// deserves (nil message and nil reply: nothing to do, as for a batch of
// notifications).
func decodeFrame(line []byte) (jsonrpc.Message, []byte) {
	if !json.Valid(line) {
		var v json.RawMessage
		err := json.Unmarshal(line, &v)
		return nil, oneReply(nil, jsonrpc.CodeParseError, fmt.Sprintf("Parse error: %v", err))
	}
	switch line[0] {
	case '[':
		return nil, batchReply(line)
	case '{':
	default:
		return nil, oneReply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: a message is a JSON object")
	}
	var env envelope
	_ = json.Unmarshal(line, &env) // valid JSON, and an object
	id, idOK := checkID(env.ID)
	if problem := checkEnvelope(env, idOK); problem != "" {
		return nil, oneReply(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+problem)
	}
	if depth(line) > maxDepth {
		return nil, oneReply(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: nested deeper than %d levels", maxDepth))
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, oneReply(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
	}
	return msg, nil
}

// checkEnvelope says what makes a message invalid, or "".
func checkEnvelope(env envelope, idOK bool) string {
	switch {
	case string(env.JSONRPC) != `"2.0"`:
		return `"jsonrpc" must be "2.0"`
	case env.ID != nil && !idOK:
		return `"id" must be a string or an integer`
	case env.Method != nil && (len(env.Method) == 0 || env.Method[0] != '"'):
		return `"method" must be a string`
	case env.Method == nil && env.ID == nil:
		return `a message needs a "method" (a request) or an "id" (a response)`
	case env.Method == nil && (env.Result == nil) == (env.Error == nil):
		return `a response carries exactly one of "result" and "error"`
	}
	return ""
}

// checkID returns the id to echo in an error reply (nil: null) and
// whether it is one MCP allows: a string or an integer.
func checkID(raw json.RawMessage) (json.RawMessage, bool) {
	if raw == nil {
		return nil, false
	}
	switch raw[0] {
	case '"':
		return raw, true
	case 'n', 't', 'f', '{', '[':
		return nil, false
	}
	// A number: an integer the go-sdk can carry without changing it.
	if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return raw, true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return raw, true
	}
	return nil, false
}

// depth is how deeply line nests objects and arrays.
func depth(line []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, b := range line {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			most = max(most, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return most
}

// batchReply answers a batch. MCP has no batches since 2025-06-18: every
// call in it is refused with its own id (so its caller stops waiting), an
// invalid member gets an error with a null id, notifications get nothing.
func batchReply(line []byte) []byte {
	var members []json.RawMessage
	_ = json.Unmarshal(line, &members)
	if len(members) == 0 {
		return oneReply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
	}
	const refused = "Invalid Request: batches are not supported (MCP 2025-06-18 and later); send each message on its own line"
	var replies []json.RawMessage
	for _, m := range members {
		var env envelope
		if len(m) == 0 || m[0] != '{' || json.Unmarshal(m, &env) != nil {
			replies = append(replies, oneReply(nil, jsonrpc.CodeInvalidRequest, refused))
			continue
		}
		id, idOK := checkID(env.ID)
		if env.Method != nil && env.ID == nil {
			continue // a notification is never answered
		}
		if env.Method == nil {
			continue // a response: not answered either
		}
		if !idOK {
			id = nil
		}
		replies = append(replies, oneReply(id, jsonrpc.CodeInvalidRequest, refused))
	}
	if len(replies) == 0 {
		return nil
	}
	out, _ := json.Marshal(replies)
	return out
}

// oneReply is a JSON-RPC error response; a nil id is written as null,
// which the go-sdk's encoder cannot do (it omits the member).
func oneReply(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message}})
	return b
}
