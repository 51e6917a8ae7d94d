// Command bench is the harness behind `make bench`. It runs the real dsh and
// plugin binaries, interleaves each measurement with its baseline in the
// same run, and prints N, median and p99 for both and their ratio, whether
// or not a target is met.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// hop is the median host -> plugin round trip of this run, measured back to
// back; idleHop the same round trip after an idle spell as long as a direct
// `bash -c true` (0 until measured). A call meets its hops idle: every
// process on the path slept while the command ran, and waking a process
// and its threads costs more than a hop that follows another. The floors
// under the latency targets are printed with both.
var hop, idleHop time.Duration

// floor prints what a path of hops costs at the least on top of the direct
// spawn (with extra, hot and idle, for what the path crosses besides), and
// how far got is above it, against the target.
func floor(what string, hops int, extraHot, extraIdle, direct, got, target time.Duration) {
	if hop == 0 {
		return
	}
	hot := direct + time.Duration(hops)*hop + extraHot
	idle := direct + time.Duration(hops)*idleHop + extraIdle
	verdict := func(f time.Duration) string {
		if got-f <= target {
			return "met"
		}
		return "missed"
	}
	fmt.Printf("  floor of the design (%s), target: within %s of it\n", what, fmtDur(target))
	fmt.Printf("    hops back to back:      %s, dsh %+.2fms over it (%s)\n", fmtDur(hot), float64(got-hot)/1e6, verdict(hot))
	fmt.Printf("    hops after idle spells: %s, dsh %+.2fms over it (%s)\n", fmtDur(idle), float64(got-idle)/1e6, verdict(idle))
}

func main() {
	plugins := flag.Int("plugins", 8, "trivial plugins per composition")
	rounds := flag.Int("rounds", 15, "composition starts (each interleaved with a baseline)")
	calls := flag.Int("calls", 2000, "round trips per call benchmark")
	runs := flag.Int("runs", 300, "foreground runs of true, and as many direct spawns")
	pwshRuns := flag.Int("pwsh-runs", 30, "foreground runs of $null in pwsh, and as many direct spawns")
	mcpRuns := flag.Int("mcp-calls", 200, "MCP tools/call of bash true per server")
	peers := flag.Bool("peers", true, "also measure two MCP shell servers from the npm registry")
	swaps := flag.Int("swaps", 3, "executor reloads under load")
	outRounds := flag.Int("output-rounds", 9, "1 GiB runs (each interleaved with a cat baseline)")
	sandboxRuns := flag.Int("sandbox-calls", 300, "bash tool calls of true per executor, sandboxed and not")
	netRuns := flag.Int("network-calls", 200, "bash tool calls of a curl GET, through the sandbox's proxy and direct (and ten times as many in-process GETs)")
	kubeRuns := flag.Int("kubernetes-calls", 100, "bash tool calls of true through bash-kubernetes, bash-local and a bare exec each")
	termRounds := flag.Int("terminal-rounds", 30, "terminal opens and sends (each interleaved with a direct pty bash)")
	sessions := flag.Int("sessions", 50, "MCP sessions over HTTP in the scale section")
	jobsEach := flag.Int("jobs", 16, "live background jobs per session in the scale section")
	binDir := flag.String("bin", filepath.Join(testplugins.Root(), "bin"), "the binaries `make build` made, measured at rest")
	only := flag.String("only", "", "run only these sections (comma-separated: start,calls,run,output,mcp,tsclient,sandbox,network,kubernetes,hooks,terminals,persistent,reload,transcript,scale,console,protocols,rest)")
	flag.Parse()
	want := func(name string) bool {
		return *only == "" || strings.Contains(","+*only+",", ","+name+",")
	}

	dir, err := os.MkdirTemp("", "dsh-bench-")
	check(err)
	defer os.RemoveAll(dir)
	check(testplugins.Build(dir))

	fmt.Printf("dsh benchmarks (%s, GOMAXPROCS from %d CPUs)\n\n", time.Now().Format(time.RFC3339), numCPU())
	if want("start") {
		startToReady(dir, *plugins, *rounds)
	}
	if want("calls") {
		hop, idleHop = roundTrips(dir, *calls)
	}
	if want("run") {
		foregroundRun(dir, *runs)
		pwshRun(dir, *pwshRuns)
	}
	if want("output") {
		bigOutput(dir, *outRounds)
	}
	if want("mcp") {
		mcpCalls(dir, *mcpRuns, *peers)
	}
	if want("tsclient") {
		tsClientCalls(dir, *mcpRuns, *peers)
	}
	if want("sandbox") {
		sandboxCalls(dir, *sandboxRuns)
	}
	if want("network") {
		networkCalls(dir, *netRuns)
	}
	if want("kubernetes") {
		kubernetesCalls(dir, *kubeRuns)
	}
	if want("hooks") {
		hookCalls(dir, *sandboxRuns)
	}
	if want("terminals") {
		terminalsBench(dir, *termRounds)
	}
	if want("terminals") || want("persistent") {
		persistentCalls(dir, *sandboxRuns)
	}
	if want("reload") {
		reloadUnderLoad(dir, *swaps)
	}
	if want("transcript") {
		transcriptChars(dir)
	}
	if want("scale") {
		scaleBench(dir, *sessions, *jobsEach)
	}
	if want("protocols") {
		protocolCalls(dir, *mcpRuns)
	}
	if want("console") {
		consoleCalls(dir, *mcpRuns)
	}
	if want("rest") {
		restBench(dir, *binDir, 9)
	}
}

// foregroundRun: `true` through the bash-local executor plugin (Exec:
// resolve and run in one call to the executor process, which spawns
// through the host) against a direct `bash -c true` from Go, interleaved
// one for one; also the two-call form (Resolve, then Run).
func foregroundRun(dir string, n int) {
	ctx := context.Background()
	h, sh := startExecutor(ctx, dir, "bash-local")
	defer h.Close(ctx)
	exited0 := func(res *shell.RunResult) {
		if res.ExitCode == nil || *res.ExitCode != 0 {
			fail("true did not exit 0")
		}
	}
	var exec1, twoCalls, direct []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(exec.Command("bash", "-c", "true").Run())
		direct = append(direct, time.Since(t))

		t = time.Now()
		res, err := sh.Exec(ctx, &shell.ExecRequest{Command: "true"})
		check(err)
		exec1 = append(exec1, time.Since(t))
		exited0(res)

		t = time.Now()
		spec, err := sh.Resolve(ctx, &shell.ExecRequest{Command: "true"})
		check(err)
		res, err = sh.Run(ctx, spec)
		check(err)
		twoCalls = append(twoCalls, time.Since(t))
		exited0(res)
	}
	fmt.Println("foreground run of `true` (target: Exec within 0.2 ms of the floor of the design)")
	row("bash-local Exec", exec1)
	row("bash-local Resolve+Run", twoCalls)
	row("direct bash -c true", direct)
	fmt.Printf("  ratio (median): Exec %.2fx, Resolve+Run %.2fx\n",
		float64(median(exec1))/float64(median(direct)), float64(median(twoCalls))/float64(median(direct)))
	floor("direct spawn + host->executor + executor->host, no other cost", 2, 0, 0, median(direct), median(exec1), 200*time.Microsecond)
	fmt.Println()
}

// toolsComposition writes the default composition's shape (shell-env,
// bash-local, tool-bash) with the binaries built into dir, as dir/name.yaml.
func toolsComposition(dir, name string) string {
	comp := filepath.Join(dir, name+".yaml")
	check(os.WriteFile(comp, []byte(fmt.Sprintf(`plugins:
  - id: env
    path: %s
  - id: bash
    path: %s
  - id: tools
    path: %s
`, filepath.Join(dir, "dsh-shell-env"), filepath.Join(dir, "dsh-bash-local"), filepath.Join(dir, "dsh-tool-bash"))), 0o600))
	return comp
}

// startToReady: `dsh serve` of N trivial plugins until it reports ready,
// against N bare starts of the same binary (in parallel, each until its
// handshake line).
func startToReady(dir string, n, rounds int) {
	var yaml strings.Builder
	yaml.WriteString("plugins:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&yaml, "  - id: noop%d\n    path: %s\n", i, filepath.Join(dir, "dsh-noop"))
	}
	comp := filepath.Join(dir, "noops.yaml")
	check(os.WriteFile(comp, []byte(yaml.String()), 0o600))

	var compT, bareT []time.Duration
	for r := 0; r < rounds; r++ {
		compT = append(compT, serveToReady(dir, comp))
		bareT = append(bareT, bareStarts(filepath.Join(dir, "dsh-noop"), n))
	}
	fmt.Printf("composition start to ready, %d trivial plugins (dsh serve until 'ready'; target: at most 3x the bare starts)\n", n)
	row("dsh serve", compT)
	row(fmt.Sprintf("%d bare starts", n), bareT)
	ratio := float64(median(compT)) / float64(median(bareT))
	fmt.Printf("  ratio (median): %.2fx (%s)\n\n", ratio, map[bool]string{true: "met", false: "missed"}[ratio <= 3])
}

func serveToReady(dir, comp string) time.Duration {
	cmd := exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp)
	stderr, err := cmd.StderrPipe()
	check(err)
	t := time.Now()
	check(cmd.Start())
	sc := bufio.NewScanner(stderr)
	var took time.Duration
	for sc.Scan() {
		if strings.Contains(sc.Text(), " ready in ") {
			took = time.Since(t)
			break
		}
	}
	if took == 0 {
		fail("dsh serve never became ready")
	}
	check(cmd.Process.Signal(syscall.SIGTERM))
	go io.Copy(io.Discard, stderr)
	check(cmd.Wait())
	return took
}

// bareStarts starts n copies of a plugin binary with the handshake cookie
// and waits for each handshake line: the floor under any host.
func bareStarts(bin string, n int) time.Duration {
	t := time.Now()
	done := make(chan *exec.Cmd, n)
	for i := 0; i < n; i++ {
		go func() {
			cmd := exec.Command(bin)
			cmd.Env = []string{
				sdk.Handshake.MagicCookieKey + "=" + sdk.Handshake.MagicCookieValue,
				"PLUGIN_PROTOCOL_VERSIONS=1", "PLUGIN_MIN_PORT=0", "PLUGIN_MAX_PORT=0",
				"PATH=/usr/bin:/bin",
			}
			out, err := cmd.StdoutPipe()
			check(err)
			check(cmd.Start())
			if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
				fail("bare start: no handshake line")
			}
			done <- cmd
		}()
	}
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmds = append(cmds, <-done)
	}
	took := time.Since(t)
	for _, c := range cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	return took
}

// roundTrips: a host-to-plugin call (the host calls the probe plugin) and a
// plugin-to-host-to-plugin call (the probe calls shell-env through the
// host's hub), in one loaded composition.
func roundTrips(dir string, n int) (hot, idle time.Duration) {
	comp := filepath.Join(dir, "pair.yaml")
	check(os.WriteFile(comp, []byte(fmt.Sprintf(`plugins:
  - id: env
    path: %s
  - id: probe
    path: %s
`, filepath.Join(dir, "dsh-shell-env"), filepath.Join(dir, "dsh-probe"))), 0o600))
	c, err := composition.Load(comp, os.LookupEnv)
	check(err)
	ctx := context.Background()
	h, err := host.Start(ctx, c, host.Options{Logger: hclog.NewNullLogger()})
	check(err)
	defer h.Close(ctx)
	probe := probev1.NewProbeClient(h.Conn("probe"))

	// The idle spell: as long as a direct spawn of bash -c true.
	var spawns []time.Duration
	for i := 0; i < 21; i++ {
		t := time.Now()
		check(exec.Command("bash", "-c", "true").Run())
		spawns = append(spawns, time.Since(t))
	}
	gap := median(spawns)

	var direct, afterIdle, hub []time.Duration
	echo := func() time.Duration {
		t := time.Now()
		_, err := probe.Echo(ctx, &probev1.EchoRequest{Data: []byte("ping")})
		check(err)
		return time.Since(t)
	}
	// Interleave in batches so both see the same machine.
	for done := 0; done < n; done += 100 {
		for i := 0; i < 100; i++ {
			direct = append(direct, echo())
		}
		for i := 0; i < 10; i++ {
			time.Sleep(gap)
			afterIdle = append(afterIdle, echo())
		}
		resp, err := probe.Bench(ctx, &probev1.BenchRequest{N: 100})
		check(err)
		for _, ns := range resp.Nanos {
			hub = append(hub, time.Duration(ns))
		}
	}
	fmt.Println("call round trips (µs)")
	row("host -> plugin", direct)
	row(fmt.Sprintf("same, after %s idle", fmtDur(gap)), afterIdle)
	row("plugin -> host -> plugin", hub)
	fmt.Printf("  ratio (median): %.2fx\n\n", float64(median(hub))/float64(median(direct)))
	return median(direct), median(afterIdle)
}

func row(name string, d []time.Duration) {
	fmt.Printf("  %-26s N=%-5d median=%-10s p99=%s\n", name, len(d), fmtDur(median(d)), fmtDur(pct(d, 0.99)))
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}

func median(d []time.Duration) time.Duration { return pct(d, 0.5) }

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "bench:", msg)
	os.Exit(1)
}

// startExecutor starts a host serving one executor plugin, the binary
// dsh-NAME in dir, and returns it with a ctx.shell client.
func startExecutor(ctx context.Context, dir, name string) (*host.Host, *shell.Client) {
	comp := filepath.Join(dir, name+".yaml")
	check(os.WriteFile(comp, []byte(fmt.Sprintf("plugins:\n  - id: shell\n    path: %s\n", filepath.Join(dir, "dsh-"+name))), 0o600))
	c, err := composition.Load(comp, os.LookupEnv)
	check(err)
	h, err := host.Start(ctx, c, host.Options{Logger: hclog.NewNullLogger()})
	check(err)
	return h, shell.NewClient(h.Conn(shell.Key), "")
}
