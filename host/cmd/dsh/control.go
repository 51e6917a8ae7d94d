package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dshrun/dsh/host"
)

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

// controlCmd runs dsh status / dsh reload / dsh console against a running
// host.
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
	if cmd == "console" {
		fmt.Fprintln(stdout, resp.ConsoleURL)
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
