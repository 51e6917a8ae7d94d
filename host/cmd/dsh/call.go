package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
)

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
