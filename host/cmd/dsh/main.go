// Command dsh is the dsh host: it loads a YAML composition of plugins and
// serves what they provide. Human-readable output (status, logs) goes to
// stderr; stdout is kept for protocols and for the data a command was asked
// for (config, plugins, version).
//
// How stdin is kept from plugins, SIGPIPE and the terminal check are
// OS-specific (stdio_*.go, term_*.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.yaml.in/yaml/v3"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/sdk"
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
  dsh console                 print a fresh one-time login URL of the running host's console
  dsh plugins                 describe every dsh-* binary on the plugin path
  dsh version                 print the version (also --version, -v)

Flags (before or after the command):
  --plugin-path DIRS   more directories to search for dsh-<name> binaries (':'-separated)
  --log-level LEVEL    trace, debug, info, warn, error (default info)
  --log-json           log JSON lines instead of text
  --json               (call, status, reload, plugins) print JSON
  --socket PATH        (status, reload, console) the host's control socket, when several hosts run
  --http ADDR          (serve) MCP over streamable HTTP on ADDR (e.g. 127.0.0.1:8765) instead of stdio,
                       and the console (a web page) at the same address
  --console ADDR       (serve) the console alone on ADDR, beside MCP on stdio
  --no-auth            (serve) no bearer token on HTTP and no console login; refused unless ADDR is loopback
  --session-timeout D  (serve) close idle HTTP sessions after D (default 30m)
  --progress-interval D (serve) the longest a running call goes without a progress notification (default 5s)
  --release-grace D    (serve) kill an ended session's jobs after D (default: clients.releaseGrace, else 10s)
The plugin path is the folder of the dsh binary, then $DSH_PLUGIN_PATH, then --plugin-path.
DSH_HEAP_PROFILE=FILE makes serve write the host's heap profile to FILE when it stops (for go tool pprof).
DSH_CPU_PROFILE=FILE profiles serve's CPU until it stops; DSH_PLUGIN_CPU_PROFILE=DIR profiles each plugin into DIR.
`

type globals struct {
	pluginPath  string
	logLevel    string
	logJSON     bool
	json        bool
	httpAddr    string
	consoleAddr string
	noAuth      bool
	sessionTTL  time.Duration
	progress    time.Duration
	grace       time.Duration
	graceSet    bool // --release-grace was given: it wins over clients.releaseGrace
	socket      string
	version     bool
}

func main() {
	noDump()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
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
	fs.StringVar(&g.consoleAddr, "console", "", "")
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
	fs.Visit(func(f *flag.Flag) { g.graceSet = g.graceSet || f.Name == "release-grace" })
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
	// Every line, the host's and its plugins', is also kept in a ring for
	// the console.
	ring := hostlog.NewRing(hostlog.DefaultRingSize)
	logger := ring.Host(hostlog.New(&logOpts))
	// go-plugin reports every clean plugin exit at info; at teardown that is
	// routine, so only failures are shown.
	pluginOpts := logOpts
	pluginOpts.Exclude = func(level hclog.Level, msg string, args ...any) bool {
		return level <= hclog.Info && (msg == "plugin process exited" || msg == "plugin exited")
	}
	pluginLogger := ring.Plugins(hostlog.New(&pluginOpts))
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
		opts := host.Options{PluginPath: pluginPath(g.pluginPath), Logger: logger, PluginLogger: pluginLogger, LogRing: ring}
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
	case "status", "reload", "console":
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
		return plugins(pluginPath(g.pluginPath), g.json, logger, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "dsh %s (plugin protocol %d)\n", buildVersion(), sdk.ProtocolVersion)
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
