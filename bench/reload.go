package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
)

// reloadUnderLoad: the executor is reloaded (make-before-break) `swaps`
// times while bash calls arrive at 50 per second. It prints the failed calls
// (target 0) and the longest latency of a call that overlapped a swap
// against the median of the calls that did not, and checks that a
// background job started before the first swap kept its id and output.
func reloadUnderLoad(dir string, swaps int) {
	comp := toolsComposition(dir, "reload")
	c, err := composition.Load(comp, os.LookupEnv)
	check(err)
	ctx := context.Background()
	h, err := host.Start(ctx, c, host.Options{Logger: hclog.NewNullLogger()})
	check(err)
	defer h.Close(ctx)

	job, err := h.CallTool(ctx, host.ToolCall{Owner: "bench", Tool: "bash", Arguments: json.RawMessage(`{"command":"for i in $(seq 1 100); do echo $i; sleep 0.05; done","description":"bg","run_in_background":true}`)})
	check(err)
	var jobFacts struct {
		JobID string `json:"jobId"`
	}
	check(json.Unmarshal(job.Structured, &jobFacts))

	type call struct {
		start, end time.Time
		err        bool
	}
	var mu sync.Mutex
	var calls []call
	var windows [][2]time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	tick := time.NewTicker(20 * time.Millisecond) // 50 calls per second
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.Now()
				r, err := h.CallTool(ctx, host.ToolCall{Owner: "bench", Tool: "bash", Arguments: json.RawMessage(`{"command":"echo x","description":"load"}`)})
				c := call{start: t, end: time.Now(), err: err != nil || r.Text != "x"}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}()
		}
	}()
	time.Sleep(time.Second)
	reloadErrs := 0
	for i := 0; i < swaps; i++ {
		s := time.Now()
		if err := h.Reload(ctx, "bash"); err != nil {
			reloadErrs++
			fmt.Fprintln(os.Stderr, "bench: reload:", err)
		}
		windows = append(windows, [2]time.Time{s, time.Now()})
		time.Sleep(700 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	tick.Stop()
	close(stop)
	wg.Wait()

	var during, outside []time.Duration
	failed := 0
	for _, c := range calls {
		if c.err {
			failed++
		}
		in := false
		for _, w := range windows {
			if c.start.Before(w[1]) && c.end.After(w[0]) {
				in = true
			}
		}
		if in {
			during = append(during, c.end.Sub(c.start))
		} else {
			outside = append(outside, c.end.Sub(c.start))
		}
	}
	// The job kept its id and its output is continuous.
	var out string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r, err := h.CallTool(ctx, host.ToolCall{Owner: "bench", Tool: "job_output", Arguments: json.RawMessage(fmt.Sprintf(`{"job_id":%q}`, jobFacts.JobID))})
		check(err)
		out += r.Text + "\n"
		if strings.Contains(r.Text, "finished]") {
			break
		}
	}
	want, got := 1, 0
	for _, line := range strings.Split(out, "\n") {
		if line == fmt.Sprint(want) {
			want++
			got++
		}
	}
	var swapTimes []time.Duration
	for _, w := range windows {
		swapTimes = append(swapTimes, w[1].Sub(w[0]))
	}
	fmt.Printf("executor reload under 50 calls/s (%d swaps, make-before-break)\n", swaps)
	fmt.Printf("  calls: %d, failed: %d (target 0); reload errors: %d\n", len(calls), failed, reloadErrs)
	row("swap duration", swapTimes)
	row("calls outside swaps", outside)
	if len(during) > 0 {
		fmt.Printf("  %-26s N=%-5d max=%-13s (%.2fx the median outside)\n", "calls during swaps", len(during), fmtDur(pct(during, 1)), float64(pct(during, 1))/float64(median(outside)))
	}
	fmt.Printf("  background job %s across the swaps: %d of 100 lines in order, none repeated or lost: %v\n\n", jobFacts.JobID, got, got == 100)
}
