package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const gib = 1 << 30

// bigOutput: 1 GiB of stdout through a foreground run (MCP tools/call of
// bash, dsh serve, tool-bash, bash-local, the host's spawn and collection)
// against piping the same bytes to `cat >/dev/null`, interleaved. It prints
// both times, the throughput ratio (target at least 80 %) and how far the
// dsh process's peak RSS rose above its RSS before the call (target at most
// 16 MiB).
func bigOutput(dir string, rounds int) {
	comp := toolsComposition(dir, "output")
	produce := "head -c " + strconv.Itoa(gib) + " /dev/zero"
	var viaDsh, viaCat []time.Duration
	var growth []int64
	resettable := true
	for i := 0; i < rounds; i++ {
		t := time.Now()
		check(exec.Command("bash", "-c", produce+" | cat >/dev/null").Run())
		viaCat = append(viaCat, time.Since(t))

		// A session per round, as `dsh call` has: a session's spill files
		// stay until it ends, and on these VMs memory a process never
		// touched before costs several times more to fill, which would
		// make later rounds measure the machine rather than dsh.
		cmd := exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp)
		cs := connect(cmd)
		pid := cmd.Process.Pid
		run := func(command string) {
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": command, "description": "bench", "timeoutMs": 600000,
			}})
			check(err)
			if r.IsError {
				fail(command + " failed: " + text(r))
			}
		}
		run("true") // warm up: connections, spill directory
		before := procKiB(pid, "VmRSS")
		if os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) != nil {
			resettable = false
		}
		t = time.Now()
		run(produce)
		viaDsh = append(viaDsh, time.Since(t))
		growth = append(growth, procKiB(pid, "VmHWM")-before)
		_ = cs.Close()
	}
	fmt.Println("1 GiB of stdout through a foreground run (MCP tools/call of bash; targets: >= 80% of cat's throughput, RSS growth <= 16 MiB)")
	row("dsh bash tool", viaDsh)
	row("same bytes | cat >/dev/null", viaCat)
	fmt.Printf("  throughput (median): dsh %.2f GiB/s, cat %.2f GiB/s: %.0f%% of cat\n",
		1/median(viaDsh).Seconds(), 1/median(viaCat).Seconds(), 100*float64(median(viaCat))/float64(median(viaDsh)))
	worst := int64(0)
	for _, g := range growth {
		worst = max(worst, g)
	}
	how := "peak RSS during the call minus RSS before it"
	if !resettable {
		how = "peak RSS since start minus RSS before the call (clear_refs not writable: an upper bound)"
	}
	fmt.Printf("  dsh host RSS growth: max %.1f MiB over %d calls (%s)\n\n", float64(worst)/1024, len(growth), how)
}

// procKiB reads a "kB" field of /proc/PID/status.
func procKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			check(err)
			return n
		}
	}
	fail("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}

// mustCall calls tool on cs and fails the bench on an error or a result
// that is one.
func mustCall(cs *mcp.ClientSession, tool string, args map[string]any) {
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	check(err)
	if r.IsError {
		fail(fmt.Sprintf("%s failed: %s", tool, text(r)))
	}
}

// timeEach runs f n times and returns how long each run took.
func timeEach(n int, f func()) []time.Duration {
	out := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		f()
		out = append(out, time.Since(t))
	}
	return out
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
