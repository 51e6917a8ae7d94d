package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/mcpserver"
	"github.com/dshrun/dsh/host/procs"
)

func serve(comp *composition.Composition, opts host.Options, g globals, stderr io.Writer) int {
	if g.httpAddr != "" && g.consoleAddr != "" {
		fmt.Fprintln(stderr, "dsh serve: --http serves the console at its own address already; --console is for a host that speaks MCP on stdio")
		return exitBadUse
	}
	token := ""
	if !g.noAuth {
		token = mcpserver.NewToken()
	}
	if g.httpAddr != "" {
		if err := mcpserver.CheckBind(g.httpAddr, token); err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		// The address is taken before any plugin starts: a bad one or a
		// port in use fails at once, with nothing started.
		ln, err := listenHTTP(g.httpAddr, "--http", "MCP over HTTP")
		if err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		defer ln.Close()
		return serveWith(comp, opts, g, stderr, func(ctx context.Context, h *host.Host, m *mcpserver.Server, _ *os.File) error {
			return serveHTTP(ctx, h, m, comp, ln, token, g.sessionTTL, stderr, opts.Logger.Named("console"))
		})
	}
	var consoleLn net.Listener
	if g.consoleAddr != "" {
		if err := mcpserver.CheckBind(g.consoleAddr, token); err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		ln, err := listenHTTP(g.consoleAddr, "--console", "the console")
		if err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		defer ln.Close()
		consoleLn = ln
	}
	return serveWith(comp, opts, g, stderr, func(ctx context.Context, h *host.Host, m *mcpserver.Server, stdin *os.File) error {
		if isTerminal(os.Stderr) {
			fmt.Fprintln(stderr, "dsh serve: speaking MCP on stdin/stdout; an MCP client starts dsh this way (see README), or use --http ADDR")
		}
		if consoleLn == nil {
			return m.RunStdio(ctx, stdin, os.Stdout)
		}
		cctx, stop := context.WithCancel(ctx)
		consoleDone := make(chan error, 1)
		go func() {
			consoleDone <- serveConsole(cctx, h, m, comp.File, consoleLn, token, stderr, opts.Logger.Named("console"))
		}()
		err := m.RunStdio(ctx, stdin, os.Stdout)
		stop()
		if cerr := <-consoleDone; err == nil && cerr != nil {
			err = fmt.Errorf("console: %w", cerr)
		}
		return err
	})
}

// serveWith loads the composition, runs front until it returns (end of
// input, a failure) or a signal comes, and tears down.
//
// On SIGINT or SIGTERM the host stops within its ShutdownBound
// (stopTimeout plus the commands' kill grace): calls are refused from then
// on while the front end keeps serving, the calls in flight are stopped
// and answered, every command is killed, the plugins stop, and only then
// does the front end close; exit 0. A second signal hurries the calls'
// stop (SIGKILL at once) but everything is still torn down.
func serveWith(comp *composition.Composition, opts host.Options, g globals, stderr io.Writer, front func(context.Context, *host.Host, *mcpserver.Server, *os.File) error) int {
	survivePipes()
	stdin, err := detachStdin()
	if err != nil {
		fmt.Fprintf(stderr, "dsh serve: %v\n", err)
		return exitFailure
	}
	sig := watchSignals()
	defer sig.release()
	ctx := sig.first
	started := time.Now()
	stopProfile := startCPUProfile(stderr)
	defer stopProfile()
	h, err := host.Start(ctx, comp, opts)
	if err != nil {
		fmt.Fprintf(stderr, "dsh serve: %v\n", err)
		return exitBadUse
	}
	mo := mcpserver.Options{
		Host:             h,
		Logger:           opts.Logger.Named("mcp"),
		Version:          buildVersion(),
		ProgressInterval: g.progress,
		ReleaseGrace:     g.grace,
	}
	if cl := comp.Clients; cl != nil {
		if cl.ReleaseGrace > 0 && !g.graceSet {
			mo.ReleaseGrace = cl.ReleaseGrace
		}
		mo.Resumable, mo.ResumeWithin = cl.Resumable(), cl.ResumeWithin
	}
	mo.Logger.Debug("owners", "end", comp.Clients.String(), "release_grace", mo.ReleaseGrace)
	m := mcpserver.New(mo)
	fmt.Fprintf(stderr, "dsh serve: %s ready in %s\n", comp.File, time.Since(started).Round(time.Millisecond))
	printStatus(stderr, h.Status())
	go h.Watch(ctx, time.Second, os.LookupEnv, func(what string, err error) {
		if err != nil {
			opts.Logger.Error("hot reload: kept the running composition", "change", what, "error", err.Error())
			return
		}
		opts.Logger.Info("hot reload: applied", "change", what)
		printStatus(stderr, h.Status())
	})
	if sock, err := h.ServeControl(ctx); err != nil {
		fmt.Fprintf(stderr, "dsh serve: %v (dsh status and dsh reload will not reach this host)\n", err)
	} else {
		opts.Logger.Debug("control socket", "path", sock)
	}
	// The front end outlives the signal: it answers until the host is
	// down.
	frontCtx, endFront := context.WithCancel(context.Background())
	defer endFront()
	frontDone := make(chan error, 1)
	go func() { frontDone <- front(frontCtx, h, m, stdin) }()
	code := exitOK
	select {
	case err := <-frontDone:
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			code = exitFailure
		}
		frontDone = nil
	case <-ctx.Done():
	}
	writeHeapProfile(stderr)
	stopProfile()
	if frontDone == nil {
		// End of input: the client is gone, nothing to answer.
		fmt.Fprintln(stderr, "dsh serve: stopping")
		cctx, cancel := context.WithTimeout(context.Background(), teardownBound(comp))
		defer cancel()
		if err := h.Close(cctx); err != nil {
			fmt.Fprintf(stderr, "dsh serve: teardown: %v\n", err)
			return exitFailure
		}
		return code
	}
	bound := h.ShutdownBound()
	fmt.Fprintf(stderr, "dsh serve: %s: stopping (calls in flight are stopped and answered; at most %s)\n", sig.name(), bound)
	deadline := time.Now().Add(bound)
	// The calls' stop is graceful until the deadline or a second signal.
	cctx, cancelCalls := context.WithDeadline(sig.second, deadline)
	defer cancelCalls()
	m.StopCalls(cctx)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := h.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "dsh serve: teardown: %v\n", err)
		code = exitFailure
	}
	m.CloseSessions()
	endFront()
	select {
	case <-frontDone:
	case <-time.After(2 * time.Second):
		opts.Logger.Warn("the front end did not end within 2s of the teardown")
	}
	return code
}

// signals are SIGINT and SIGTERM as a serving host takes them: first asks
// it to stop, second to hurry. Both stay caught until release, so a late
// one cannot cut the teardown short.
type signals struct {
	first, second context.Context
	release       func()
	mu            sync.Mutex
	got           os.Signal
}

func watchSignals() *signals {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	first, stop1 := context.WithCancel(context.Background())
	second, stop2 := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := &signals{first: first, second: second}
	go func() {
		n := 0
		for {
			select {
			case sig := <-ch:
				n++
				if n == 1 {
					s.mu.Lock()
					s.got = sig
					s.mu.Unlock()
					stop1()
				} else {
					stop2()
				}
			case <-done:
				return
			}
		}
	}()
	s.release = func() {
		signal.Stop(ch)
		close(done)
		stop1()
		stop2()
	}
	return s
}

// name is the first signal's name (SIGINT, SIGTERM).
func (s *signals) name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig, ok := s.got.(syscall.Signal); ok {
		return procs.SignalName(sig)
	}
	return fmt.Sprint(s.got)
}

// teardownBound bounds the whole teardown: every plugin stop in series.
func teardownBound(comp *composition.Composition) time.Duration {
	per := comp.Host.StopTimeout
	if per <= 0 {
		per = 5 * time.Second
	}
	return per*time.Duration(len(comp.Plugins)+1) + time.Second
}
