package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The control socket lets `dsh status`, `dsh reload ID` and `dsh console`
// reach a running host. It lives in the host's runtime directory (mode 0700) and is itself
// mode 0600: only the user running the host can use it. One JSON request
// per connection, one JSON answer.

// ControlSocket is the file name of the control socket in a host's runtime
// directory.
const ControlSocket = "control.sock"

// ControlRequest is what a control client sends.
type ControlRequest struct {
	Op string `json:"op"` // "status", "reload" or "console"
	ID string `json:"id,omitempty"`
}

// ControlResponse is the answer.
type ControlResponse struct {
	Error       string `json:"error,omitempty"`
	Composition string `json:"composition,omitempty"`
	Pid         int    `json:"pid,omitempty"`
	// Limits says how each command's processes and memory are limited
	// ("per command: 4096 processes by cgroup v1, ..."), or why they are
	// not ("unavailable (...)").
	Limits string `json:"limits,omitempty"`
	// ConsoleURL is a fresh one-time console login URL (op "console").
	ConsoleURL string `json:"consoleURL,omitempty"`
	// Entries is every entry's status ([] when there is none).
	Entries []EntryStatus `json:"entries"`
}

// ServeControl listens on the control socket until ctx is done.
func (h *Host) ServeControl(ctx context.Context) (string, error) {
	path := filepath.Join(h.rt.dir, ControlSocket)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return "", fmt.Errorf("control socket: %w", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.control(ctx, c)
		}
	}()
	return path, nil
}

func (h *Host) control(ctx context.Context, c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	var req ControlRequest
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
		_ = json.NewEncoder(c).Encode(ControlResponse{Error: "bad request: " + err.Error()})
		return
	}
	resp := ControlResponse{Composition: h.comp.File, Pid: os.Getpid(), Limits: h.sub.Limits().String()}
	switch req.Op {
	case "status":
	case "reload":
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := h.Reload(rctx, req.ID)
		cancel()
		if err != nil {
			resp.Error = err.Error()
		}
	case "console":
		if login := h.consoleLogin.Load(); login != nil {
			resp.ConsoleURL = (*login)()
		} else {
			resp.Error = "this host serves no console: start it with dsh serve --http ADDR or --console ADDR"
		}
	default:
		resp.Error = fmt.Sprintf("unknown op %q (status, reload, console)", req.Op)
	}
	resp.Entries = h.Status()
	if resp.Entries == nil {
		resp.Entries = []EntryStatus{}
	}
	_ = json.NewEncoder(c).Encode(resp)
}

// SetConsoleLogin makes `dsh console` answer with login(): a fresh
// one-time login URL of the console this host serves.
func (h *Host) SetConsoleLogin(login func() string) { h.consoleLogin.Store(&login) }

// Control sends one request to the host listening on socket.
func Control(socket string, req ControlRequest) (*ControlResponse, error) {
	c, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var resp ControlResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

// FindControlSockets lists the control sockets of running hosts under
// base ("" means the default runtime base).
func FindControlSockets(base string) []string {
	if base == "" {
		base = defaultRuntimeBase()
	}
	matches, _ := filepath.Glob(filepath.Join(base, "host-*", ControlSocket))
	var out []string
	for _, m := range matches {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(m)), "host-%d", &pid); err == nil && processAlive(pid) {
			out = append(out, m)
		}
	}
	return out
}
