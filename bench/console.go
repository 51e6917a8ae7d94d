package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// consoleCalls: MCP tools/call of bash `true` over streamable HTTP to
// `dsh serve --http`, in blocks with no console page open and blocks with
// one open (its event stream held, as a browser tab holds it), interleaved.
// The page's updates (an agents snapshot per call's start and end) are the
// cost of watching; with no page open the console must cost nothing, which
// the mcp section's figures before and after the console show.
func consoleCalls(dir string, n int) {
	s := startHTTPServe(dir)
	defer s.stop()
	cs := s.connect()
	defer cs.Close()
	call := func() { mustCall(cs, "bash", map[string]any{"command": "true", "description": "bench"}) }
	for i := 0; i < 10; i++ {
		call() // warm up
	}
	base := strings.TrimSuffix(s.url, "/")
	// openPage holds the console's event stream until close is called, and
	// counts the events it got.
	openPage := func() (events *int, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/api/events", nil)
		check(err)
		resp, err := s.client.Do(req)
		check(err)
		if resp.StatusCode != http.StatusOK {
			fail(fmt.Sprintf("console events: %s", resp.Status))
		}
		n := new(int)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					*n++
				}
			}
		}()
		return n, func() { cancel(); _ = resp.Body.Close(); <-done }
	}
	const block = 10
	var closed, open []time.Duration
	events := 0
	for len(closed) < n {
		closed = append(closed, timeEach(block, call)...)
		got, stop := openPage()
		time.Sleep(50 * time.Millisecond) // the page's first snapshots
		open = append(open, timeEach(block, call)...)
		stop()
		events += *got
	}
	fmt.Println("MCP tools/call of bash `true` over HTTP, blocks of 10 with no console page open and with one open, interleaved")
	row("no page open", closed)
	row("a page open", open)
	fmt.Printf("  the open pages got %d events\n\n", events)
}
