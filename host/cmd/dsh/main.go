// Command dsh is the dsh host: it loads a YAML composition of plugins and
// serves what they provide. Human-readable output (status, logs) goes to
// stderr; stdout is kept for protocols and for the data a command was asked
// for (config, plugins, version).
//
// How stdin is kept from plugins, SIGPIPE and the terminal check are
// OS-specific (stdio_*.go, term_*.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/mcpserver"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/watchdog"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1   // the host failed while running
	exitBadUse      = 2   // bad arguments, bad composition, a plugin that would not load
	exitInterrupted = 130 // dsh call interrupted (SIGINT or SIGTERM), as shells report it
)

var version = "dev"

const usage = `dsh: a host for the tools AI coding agents use to run commands

Usage:
  dsh serve COMPOSITION       load the composition and serve its tools over MCP (stdio, or
                              streamable HTTP with --http) until end of input or SIGINT/SIGTERM
  dsh validate COMPOSITION    check the composition, every plugin's description and what each
                              would read when applied (the files its config names); start nothing for real
  dsh config COMPOSITION      print the resolved composition, secrets masked
  dsh call COMPOSITION TOOL JSON
                              load, call one tool as the agent "cli", print its text, tear down
  dsh status                  show every entry of the running host: state, pid, restarts, uptime, why pending
  dsh reload ID               restart one entry of the running host (make-before-break for providers)
  dsh plugins                 describe every dsh-* binary on the plugin path
  dsh version                 print the version (also --version, -v)

Flags (before or after the command):
  --plugin-path DIRS   more directories to search for dsh-<name> binaries (':'-separated)
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-json           log JSON lines instead of text
  --json               (call, status, reload) print JSON
  --socket PATH        (status, reload) the host's control socket, when several hosts run
  --http ADDR          (serve) MCP over streamable HTTP on ADDR (e.g. 127.0.0.1:8765) instead of stdio
  --no-auth            (serve) no bearer token on HTTP; refused unless ADDR is loopback
  --session-timeout D  (serve) close idle HTTP sessions after D (default 30m)
  --progress-interval D (serve) the longest a running call goes without a progress notification (default 5s)
  --release-grace D    (serve) kill an ended HTTP session's jobs after D (default 10s)
The plugin path is the folder of the dsh binary, then $DSH_PLUGIN_PATH, then --plugin-path.
DSH_HEAP_PROFILE=FILE makes serve write the host's heap profile to FILE when it stops (for go tool pprof).
DSH_CPU_PROFILE=FILE profiles serve's CPU until it stops; DSH_PLUGIN_CPU_PROFILE=DIR profiles each plugin into DIR.
`

type globals struct {
	pluginPath string
	logLevel   string
	logJSON    bool
	json       bool
	httpAddr   string
	noAuth     bool
	sessionTTL time.Duration
	progress   time.Duration
	grace      time.Duration
	socket     string
	version    bool
}

func main() {
	noDump()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// watchdogExe is the watchdog binary next to this one (only Linux runs
// one). Missing, the host says so and runs this binary as its watchdog
// instead (it takes the same arguments): the same guard, at ~20 MiB more
// at rest.
func watchdogExe(logger hclog.Logger) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	wd := filepath.Join(filepath.Dir(exe), watchdog.Binary+filepath.Ext(exe))
	if _, err := os.Stat(wd); err != nil && runtime.GOOS == "linux" {
		logger.Warn("the watchdog binary is missing next to dsh (make build builds it); dsh itself runs as the watchdog", "want", wd, "error", err)
		return exe
	}
	return wd
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == procs.WatchdogArg {
		if err := procs.RunWatchdog(args[1]); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		return exitOK
	}
	var g globals
	fs := flag.NewFlagSet("dsh", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	fs.StringVar(&g.pluginPath, "plugin-path", "", "")
	fs.StringVar(&g.logLevel, "log-level", "info", "")
	fs.BoolVar(&g.logJSON, "log-json", false, "")
	fs.BoolVar(&g.json, "json", false, "")
	fs.StringVar(&g.httpAddr, "http", "", "")
	fs.BoolVar(&g.noAuth, "no-auth", false, "")
	fs.DurationVar(&g.sessionTTL, "session-timeout", 30*time.Minute, "")
	fs.DurationVar(&g.progress, "progress-interval", 5*time.Second, "")
	fs.DurationVar(&g.grace, "release-grace", 10*time.Second, "")
	fs.StringVar(&g.socket, "socket", "", "")
	fs.BoolVar(&g.version, "version", false, "")
	fs.BoolVar(&g.version, "v", false, "")
	// Flags may come before or after the command and its argument.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitBadUse
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if g.version && len(positional) == 0 {
		positional = []string{"version"}
	}
	if len(positional) == 0 {
		fmt.Fprint(stderr, usage)
		return exitBadUse
	}
	if hclog.LevelFromString(g.logLevel) == hclog.NoLevel {
		fmt.Fprintf(stderr, "dsh: unknown log level %q (trace, debug, info, warn, error)\n", g.logLevel)
		return exitBadUse
	}
	logOpts := hclog.LoggerOptions{
		Name:       "dsh",
		Level:      hclog.LevelFromString(g.logLevel),
		Output:     stderr,
		JSONFormat: g.logJSON,
		Color:      hclog.AutoColor,
	}
	logger := hostlog.New(&logOpts)
	// go-plugin reports every clean plugin exit at info; at teardown that is
	// routine, so only failures are shown.
	pluginOpts := logOpts
	pluginOpts.Exclude = func(level hclog.Level, msg string, args ...any) bool {
		return level <= hclog.Info && (msg == "plugin process exited" || msg == "plugin exited")
	}
	pluginLogger := hostlog.New(&pluginOpts)
	cmd, rest := positional[0], positional[1:]
	needOne := func() (string, bool) {
		if len(rest) != 1 {
			fmt.Fprintf(stderr, "dsh %s: want exactly one COMPOSITION argument, got %d\n", cmd, len(rest))
			return "", false
		}
		return rest[0], true
	}
	switch cmd {
	case "call":
		if len(rest) != 3 {
			fmt.Fprintf(stderr, "dsh call: want COMPOSITION TOOL JSON, got %d arguments\n", len(rest))
			return exitBadUse
		}
		comp, err := composition.Load(rest[0], os.LookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "dsh call: %v\n", err)
			return exitBadUse
		}
		opts := host.Options{PluginPath: pluginPath(g.pluginPath), Logger: logger, PluginLogger: pluginLogger}
		opts.WatchdogExe = watchdogExe(logger)
		// The text may name spill files: they must outlive this process.
		opts.SpillDir = filepath.Join(os.TempDir(), fmt.Sprintf("dsh-call-%d", os.Getuid()), strconv.Itoa(os.Getpid()))
		code := call(comp, opts, rest[1], rest[2], g.json, stdout, stderr)
		_ = os.Remove(opts.SpillDir) // only when nothing spilled
		return code
	case "serve", "validate", "config":
		file, ok := needOne()
		if !ok {
			return exitBadUse
		}
		comp, err := composition.Load(file, os.LookupEnv)
		if err != nil {
			// Counted and listed as the plan's problems are.
			fmt.Fprintf(stderr, "dsh %s: %v\n", cmd, &host.LoadError{File: file, Errs: []error{err}})
			return exitBadUse
		}
		opts := host.Options{PluginPath: pluginPath(g.pluginPath), Logger: logger, PluginLogger: pluginLogger}
		if cmd == "serve" {
			opts.WatchdogExe = watchdogExe(logger)
		}
		switch cmd {
		case "serve":
			return serve(comp, opts, g, stderr)
		case "validate":
			return validate(comp, opts, stderr)
		default:
			out, err := yaml.Marshal(comp.Masked())
			if err != nil {
				fmt.Fprintf(stderr, "dsh config: %v\n", err)
				return exitFailure
			}
			_, _ = stdout.Write(out)
			return exitOK
		}
	case "status", "reload":
		want := 0
		if cmd == "reload" {
			want = 1
		}
		if len(rest) != want {
			fmt.Fprintf(stderr, "dsh %s: want %d argument(s), got %d\n", cmd, want, len(rest))
			return exitBadUse
		}
		return controlCmd(cmd, rest, g, stdout, stderr)
	case "plugins":
		if len(rest) != 0 {
			fmt.Fprintf(stderr, "dsh plugins: takes no argument\n")
			return exitBadUse
		}
		return plugins(pluginPath(g.pluginPath), logger, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "dsh %s (plugin protocol %d)\n", buildVersion(), 1)
		return exitOK
	default:
		fmt.Fprintf(stderr, "dsh: unknown command %q\n\n%s", cmd, usage)
		return exitBadUse
	}
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return version
}

// pluginPath is the folder of the dsh binary, then $DSH_PLUGIN_PATH, then
// --plugin-path.
func pluginPath(flagValue string) []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, v := range []string{os.Getenv("DSH_PLUGIN_PATH"), flagValue} {
		for _, d := range filepath.SplitList(v) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

func serve(comp *composition.Composition, opts host.Options, g globals, stderr io.Writer) int {
	if g.httpAddr != "" {
		token := ""
		if !g.noAuth {
			token = mcpserver.NewToken()
		}
		if err := mcpserver.CheckBind(g.httpAddr, token); err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		g.noAuth = token == ""
		// The address is taken before any plugin starts: a bad one or a
		// port in use fails at once, with nothing started.
		ln, err := listenHTTP(g.httpAddr)
		if err != nil {
			fmt.Fprintf(stderr, "dsh serve: %v\n", err)
			return exitBadUse
		}
		defer ln.Close()
		return serveWith(comp, opts, g, stderr, func(ctx context.Context, h *host.Host, m *mcpserver.Server, _ *os.File) error {
			return serveHTTP(ctx, h, m, ln, token, g.sessionTTL, stderr)
		})
	}
	return serveWith(comp, opts, g, stderr, func(ctx context.Context, h *host.Host, m *mcpserver.Server, stdin *os.File) error {
		if isTerminal(os.Stderr) {
			fmt.Fprintln(stderr, "dsh serve: speaking MCP on stdin/stdout; an MCP client starts dsh this way (see README), or use --http ADDR")
		}
		return m.RunStdio(ctx, stdin, os.Stdout)
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
	m := mcpserver.New(mcpserver.Options{
		Host:             h,
		Logger:           opts.Logger.Named("mcp"),
		Version:          buildVersion(),
		ProgressInterval: g.progress,
		ReleaseGrace:     g.grace,
	})
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

// listenHTTP listens on addr for serve --http, or says in one sentence why
// it cannot.
func listenHTTP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	var ae *net.AddrError
	var dnsErr *net.DNSError
	hint := ""
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "; another process listens there: stop it or pick another port (port 0 picks a free one)"
	case errors.As(err, &ae), errors.As(err, &dnsErr):
		hint = "; --http takes HOST:PORT, e.g. 127.0.0.1:8765"
	}
	return nil, fmt.Errorf("cannot listen on %q for MCP over HTTP: %v%s", addr, err, hint)
}

// serveHTTP serves MCP over streamable HTTP on ln until ctx is done.
func serveHTTP(ctx context.Context, h *host.Host, m *mcpserver.Server, ln net.Listener, token string, ttl time.Duration, stderr io.Writer) error {
	srv := &http.Server{
		Handler:           m.HTTPHandler(mcpserver.HTTPOptions{Token: token, SessionTimeout: ttl}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		tokenFile := filepath.Join(h.RuntimeDir(), "http-token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s\n  bearer token: %s\n  (also in %s, mode 0600)\n", url, token, tokenFile)
	} else {
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s (no token: loopback only)\n", url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The sessions are closed (serveWith did, after the calls were
	// answered): their streams end, and what is still being written
	// completes before the server closes.
	m.CloseSessions()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// teardownBound bounds the whole teardown: every plugin stop in series.
func teardownBound(comp *composition.Composition) time.Duration {
	per := comp.Host.StopTimeout
	if per <= 0 {
		per = 5 * time.Second
	}
	return per*time.Duration(len(comp.Plugins)+1) + time.Second
}

func printStatus(w io.Writer, st []host.EntryStatus) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tPLUGIN\tSTATE\tPID\tRESTARTS\tUPTIME\tPROVIDES\tTOOLS")
	for _, s := range st {
		pid, up := "-", "-"
		if s.Pid > 0 {
			pid = fmt.Sprint(s.Pid)
			up = s.Uptime.Round(time.Second).String()
		}
		state := s.State
		if s.Reason != "" {
			state += " (" + s.Reason + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.Name, state, pid, s.Restarts, up, dash(s.Provides), dash(s.Tools))
	}
	_ = tw.Flush()
}

// controlCmd runs dsh status / dsh reload against a running host.
func controlCmd(cmd string, rest []string, g globals, stdout, stderr io.Writer) int {
	sock := g.socket
	if sock == "" {
		socks := host.FindControlSockets("")
		switch len(socks) {
		case 0:
			fmt.Fprintf(stderr, "dsh %s: no running dsh host found (is dsh serve running as this user?)\n", cmd)
			return exitFailure
		case 1:
			sock = socks[0]
		default:
			fmt.Fprintf(stderr, "dsh %s: %d hosts are running; pick one with --socket:\n  %s\n", cmd, len(socks), strings.Join(socks, "\n  "))
			return exitBadUse
		}
	}
	req := host.ControlRequest{Op: cmd}
	if cmd == "reload" {
		req.ID = rest[0]
	}
	resp, err := host.Control(sock, req)
	if err != nil {
		fmt.Fprintf(stderr, "dsh %s: %v\n", cmd, err)
		return exitFailure
	}
	if g.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
		return exitOK
	}
	if cmd == "reload" {
		fmt.Fprintf(stdout, "reloaded %s\n", req.ID)
	}
	fmt.Fprintf(stdout, "%s (pid %d)\n", resp.Composition, resp.Pid)
	if resp.Limits != "" {
		fmt.Fprintf(stdout, "limits: %s\n", resp.Limits)
	}
	printStatus(stdout, resp.Entries)
	return exitOK
}

func dash(v []string) string {
	if len(v) == 0 {
		return "-"
	}
	return strings.Join(v, ",")
}

func validate(comp *composition.Composition, opts host.Options, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ds, err := host.Validate(ctx, comp, opts)
	if err != nil {
		fmt.Fprintf(stderr, "dsh validate: %v\n", err)
		return exitBadUse
	}
	fmt.Fprintf(stderr, "dsh validate: %s is valid (%d plugins)\n", composition.Pos{File: comp.File}, len(ds))
	for _, d := range ds {
		if d.Disabled {
			fmt.Fprintf(stderr, "  %s: disabled\n", d.ID)
			continue
		}
		fmt.Fprintf(stderr, "  %s: %s %s (%s)%s\n", d.ID, d.Description.Name, d.Description.Version, d.Binary, describeKeys(d.Description))
	}
	return exitOK
}

func describeKeys(d *pluginv1.Description) string {
	var parts []string
	for _, p := range d.Provides {
		parts = append(parts, "provides "+p.Key)
	}
	for _, in := range d.Inject {
		s := "injects " + in.Key
		if in.Optional {
			s += "?"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

// plugins starts every dsh-* binary on the plugin path (first one of each
// name wins, as in a composition) and prints its description as JSON lines.
func plugins(dirs []string, logger hclog.Logger, stdout, stderr io.Writer) int {
	seen := map[string]bool{}
	var bins []string
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, "dsh-*"))
		sort.Strings(matches)
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || seen[filepath.Base(m)] {
				continue
			}
			seen[filepath.Base(m)] = true
			bins = append(bins, m)
		}
	}
	code := exitOK
	enc := json.NewEncoder(stdout)
	for _, bin := range bins {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		p, err := pluginproc.Start(ctx, pluginproc.Config{
			ID:     strings.TrimPrefix(filepath.Base(bin), "dsh-"),
			Binary: bin,
			Env:    host.PluginEnv(os.LookupEnv, strings.TrimPrefix(filepath.Base(bin), "dsh-")),
			Logger: logger.Named(filepath.Base(bin)),
		})
		if err != nil {
			fmt.Fprintf(stderr, "dsh plugins: %v\n", err)
			code = exitFailure
			cancel()
			continue
		}
		d := p.Description()
		_ = p.Stop(ctx)
		cancel()
		dj, err := protojson.Marshal(d)
		if err != nil {
			fmt.Fprintf(stderr, "dsh plugins: %s: %v\n", bin, err)
			code = exitFailure
			continue
		}
		_ = enc.Encode(map[string]any{"binary": bin, "description": json.RawMessage(dj)})
	}
	if len(bins) == 0 {
		fmt.Fprintf(stderr, "dsh plugins: no dsh-* binary in %s\n", strings.Join(dirs, ":"))
	}
	return code
}

// inBackground reports whether args ask the shell tools for a background
// job (run_in_background: true), which cannot outlive dsh call.
func inBackground(args string) bool {
	var a struct {
		Background bool `json:"run_in_background"`
	}
	return json.Unmarshal([]byte(args), &a) == nil && a.Background
}

// call loads the composition, calls one tool as the agent "cli", prints the
// model-facing text (or, with --json, the whole result) and tears down.
// Exit 0 when the tool ran, whatever the command's own exit code; 1 when
// the call itself failed; 2 for a bad composition or bad arguments.
func call(comp *composition.Composition, opts host.Options, tool, args string, asJSON bool, stdout, stderr io.Writer) int {
	if !json.Valid([]byte(args)) {
		fmt.Fprintf(stderr, "dsh call: the arguments are not valid JSON: %s\n", args)
		return exitBadUse
	}
	if inBackground(args) {
		fmt.Fprintf(stderr, "dsh call: run_in_background is refused here: dsh call stops every job it started when it exits, so nothing could read the job; run the command in the foreground (without run_in_background), or serve the composition (dsh serve) to keep jobs between calls\n")
		return exitBadUse
	}
	survivePipes()
	if _, err := detachStdin(); err != nil {
		fmt.Fprintf(stderr, "dsh call: %v\n", err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, err := host.Start(ctx, comp, opts)
	if err != nil {
		fmt.Fprintf(stderr, "dsh call: %v\n", err)
		return exitBadUse
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), teardownBound(comp))
		defer cancel()
		if err := h.Close(cctx); err != nil {
			fmt.Fprintf(stderr, "dsh call: teardown: %v\n", err)
		}
	}()
	res, err := h.CallTool(ctx, host.ToolCall{Owner: "cli", Tool: tool, Arguments: json.RawMessage(args)})
	var ae *host.ArgumentsError
	switch {
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "dsh call: %v\n", err)
		return exitBadUse
	case err != nil && ctx.Err() != nil:
		// Interrupted: the command's tree was killed with the call.
		fmt.Fprintf(stderr, "dsh call: interrupted; %s was stopped, with every process it started\n", tool)
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "dsh call: %v\n", err)
		return exitFailure
	}
	if asJSON {
		structured := res.Structured
		if len(structured) == 0 {
			structured = json.RawMessage("null")
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := map[string]any{"text": res.Text, "structured": structured, "isError": res.IsError}
		if len(res.Feedback) > 0 {
			out["feedback"] = res.Feedback
		}
		_ = enc.Encode(out)
		return exitOK
	}
	for _, text := range append([]string{res.Text}, res.Feedback...) {
		fmt.Fprint(stdout, text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	return exitOK
}
