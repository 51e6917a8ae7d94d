package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/sdk"
)

// scaleBench: `dsh serve --http` of the default composition with many MCP
// sessions (each its own owner) holding the most live background jobs an
// owner may have (16), then job_output reads and concurrent foreground
// calls across them. The host's RSS is read before the jobs (the sessions
// alone: the baseline) and with them.
func scaleBench(dir string, sessions, jobsEach int) {
	srv := startHTTPServe(dir)
	ctx := context.Background()

	css := make([]*mcp.ClientSession, sessions)
	for i := range css {
		css[i] = srv.connect()
		_, err := css[i].ListTools(ctx, nil)
		check(err)
	}
	// The host stops with every job live (DSH_HEAP_PROFILE then profiles
	// them), and the sessions go after.
	defer func() {
		for _, cs := range css {
			_ = cs.Close()
		}
	}()
	defer srv.stop()
	time.Sleep(time.Second)
	idle := rssKiB(srv.cmd.Process.Pid)

	// Every session starts its jobs at once with the others.
	jobIDs := make([][]string, sessions)
	startFails := make([]int, sessions)
	idRe := regexp.MustCompile(`\[job (\S+) started`)
	var starts []time.Duration
	var mu sync.Mutex
	parallel(sessions, func(s int) {
		for j := 0; j < jobsEach; j++ {
			t := time.Now()
			r, err := css[s].CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": fmt.Sprintf("echo session %d job %d; sleep 600", s, j), "description": "bench job", "run_in_background": true,
			}})
			took := time.Since(t)
			m := []string(nil)
			if err == nil && !r.IsError {
				m = idRe.FindStringSubmatch(text(r))
			}
			mu.Lock()
			if m == nil {
				startFails[s]++
			} else {
				jobIDs[s] = append(jobIDs[s], m[1])
				starts = append(starts, took)
			}
			mu.Unlock()
		}
	})
	live := 0
	for _, ids := range jobIDs {
		live += len(ids)
	}
	time.Sleep(2 * time.Second) // the jobs' first output is in
	loaded := rssKiB(srv.cmd.Process.Pid)

	// job_output of every job, three rounds, every session at once, each
	// read after an MCP ping on the same session (the baseline: the MCP
	// leg alone).
	var reads, pings []time.Duration
	readFails := make([]int, sessions)
	for round := 0; round < 3; round++ {
		parallel(sessions, func(s int) {
			for _, id := range jobIDs[s] {
				t := time.Now()
				perr := css[s].Ping(ctx, nil)
				pt := time.Since(t)
				t = time.Now()
				r, err := css[s].CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": id}})
				rt := time.Since(t)
				ok := perr == nil && err == nil && !r.IsError && strings.Contains(text(r), "is still running")
				mu.Lock()
				if !ok {
					readFails[s]++
				}
				reads, pings = append(reads, rt), append(pings, pt)
				mu.Unlock()
			}
		})
	}

	// Foreground calls, two per session at once, against as many direct
	// bash -c spawns at once, interleaved over rounds.
	const fgRounds = 3
	var fg, direct []time.Duration
	fgFails := 0
	for round := 0; round < fgRounds; round++ {
		parallel(2*sessions, func(i int) {
			t := time.Now()
			err := exec.Command("bash", "-c", "echo hi").Run()
			took := time.Since(t)
			check(err)
			mu.Lock()
			direct = append(direct, took)
			mu.Unlock()
		})
		parallel(2*sessions, func(i int) {
			t := time.Now()
			r, err := css[i%sessions].CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi", "description": "bench"}})
			took := time.Since(t)
			mu.Lock()
			if err != nil || r.IsError || !strings.Contains(text(r), "hi") {
				fgFails++
			}
			fg = append(fg, took)
			mu.Unlock()
		})
	}
	after := rssKiB(srv.cmd.Process.Pid)
	peak := statusKiB(srv.cmd.Process.Pid, "VmHWM")

	answered := 0
	for s := range css {
		if startFails[s] == 0 && readFails[s] == 0 {
			answered++
		}
	}
	fmt.Printf("%d MCP sessions over HTTP, %d live background jobs each (target: host RSS at most 64 MiB, every session answered, no foreground call failed)\n", sessions, jobsEach)
	fmt.Printf("  live jobs: %d of %d started; sessions answered in full: %d of %d\n", live, sessions*jobsEach, answered, sessions)
	fmt.Printf("  host RSS: %s with the jobs (%s); %s with the sessions alone; %.1f KiB a job; after the calls %s, peak %s\n",
		mib(loaded), met(loaded <= 64<<10), mib(idle), float64(loaded-idle)/float64(max(live, 1)), mib(after), mib(peak))
	row("bash run_in_background", starts)
	row("job_output read", reads)
	row("MCP ping (same session)", pings)
	fmt.Printf("  job_output reads failed: %d of %d\n", sum(readFails), len(reads))
	fmt.Printf("%d concurrent foreground calls of `echo hi` from %d sessions, %d rounds\n", 2*sessions, sessions, fgRounds)
	row("dsh bash", fg)
	row("direct bash -c, as many", direct)
	fmt.Printf("  failed: %d of %d (%s)\n\n", fgFails, len(fg), met(fgFails == 0))
}

// restBench: the idle default composition's processes, RSS each and their
// sum, sampled after the first answered tools/list has settled. It runs the
// binaries `make build` made (binDir), as a user would; a bare trivial
// plugin is the floor of any plugin process.
func restBench(dir, binDir string, samples int) {
	if _, err := os.Stat(filepath.Join(binDir, "dsh")); err != nil {
		fmt.Printf("memory at rest: not measured, no %s (run make build)\n\n", filepath.Join(binDir, "dsh"))
		return
	}
	comp := filepath.Join(testplugins.Root(), "compositions", "default.yaml")
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", "--log-level", "error", comp)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+mkTemp(dir, "rt-rest"))
	cs := connect(cmd)
	defer cs.Close()
	_, err := cs.ListTools(context.Background(), nil)
	check(err)
	bare := startBare(filepath.Join(dir, "dsh-noop"))
	defer func() { _ = bare.Process.Kill(); _ = bare.Wait() }()
	time.Sleep(2 * time.Second)

	byName := map[string][]int64{}
	var sums, floor []int64
	for i := 0; i < samples; i++ {
		var total int64
		for _, p := range append([]int{cmd.Process.Pid}, children(cmd.Process.Pid)...) {
			kb := rssKiB(p)
			name := comm(p)
			if p != cmd.Process.Pid {
				// The host's own helpers (its watchdog) by their argument.
				if args := cmdline(p); name == "dsh" && len(args) > 1 {
					name += " " + args[1]
				}
			}
			byName[name] = append(byName[name], kb)
			total += kb
		}
		sums = append(sums, total)
		floor = append(floor, rssKiB(bare.Process.Pid))
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Printf("memory at rest: idle default composition (%s), RSS in MiB over %d samples\n", binDir, samples)
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		kibRow(n, byName[n])
	}
	kibRow("sum", sums)
	kibRow("bare dsh-noop (floor)", floor)
	fmt.Println()
}

func kibRow(name string, v []int64) {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	fmt.Printf("  %-26s N=%-5d median=%-10s max=%s\n", name, len(s), mib(s[len(s)/2]), mib(s[len(s)-1]))
}

type httpServe struct {
	cmd          *exec.Cmd
	url, token   string
	client       *http.Client
	stderrCopied chan struct{}
}

// startHTTPServe starts dsh serve --http of the default composition and
// reads its URL and bearer token from stderr.
func startHTTPServe(dir string) *httpServe {
	comp := filepath.Join(testplugins.Root(), "compositions", "default.yaml")
	s := &httpServe{stderrCopied: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", "--http", "127.0.0.1:0", "--release-grace", "300ms", comp)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+mkTemp(dir, "rt-scale"))
	pr, err := s.cmd.StderrPipe()
	check(err)
	check(s.cmd.Start())
	sc := bufio.NewScanner(pr)
	urlRe, tokRe := regexp.MustCompile(`at (http://\S+/)`), regexp.MustCompile(`bearer token: (\S+)`)
	for sc.Scan() {
		if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
			s.url = m[1]
		}
		if m := tokRe.FindStringSubmatch(sc.Text()); m != nil {
			s.token = m[1]
			break
		}
	}
	if s.url == "" || s.token == "" {
		fail("dsh serve --http printed no URL and token")
	}
	go func() { _, _ = io.Copy(os.Stderr, pr); close(s.stderrCopied) }()
	// Every session holds a connection for its stream: room for all.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1000
	s.client = &http.Client{Transport: bearer{s.token, tr}}
	return s
}

// connect opens an MCP session (protocol 2025-11-25: each session its own
// owner, as the scale and console sections need).
func (s *httpServe) connect() *mcp.ClientSession { return s.connectAt("2025-11-25") }

// connectAt connects the go-sdk client at version; "" is its latest, the
// stateless protocol.
func (s *httpServe) connectAt(version string) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "dsh-bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: s.client}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	check(err)
	return cs
}

func (s *httpServe) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.stderrCopied
	_ = s.cmd.Wait()
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// startBare starts a plugin binary with the handshake cookie, as a host
// would, and waits for its handshake line.
func startBare(bin string) *exec.Cmd {
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
	return cmd
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// rssKiB is a process's resident set in KiB (0 once it is gone).
func rssKiB(pid int) int64 { return statusKiB(pid, "VmRSS") }

func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// children are the pids whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The parent is the second field after the parenthesized name.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func cmdline(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

func mkTemp(dir, name string) string {
	p := filepath.Join(dir, name)
	check(os.MkdirAll(p, 0o700))
	return p
}
