package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MCP tasks through the TypeScript SDK's own experimental tasks API
// (test/mcp-node/tasks.mjs), over stdio and HTTP: a task that runs to its
// end, one cancelled while its command runs, another session that does not
// see them, and a client without tasks that gets plain calls.
func TestMCPNodeTasks(t *testing.T) {
	dir, node := tsSDK(t)
	type run struct {
		TaskID       string   `json:"taskId"`
		Messages     []string `json:"messages"`
		Statuses     []string `json:"statuses"`
		Text         string   `json:"text"`
		Error        string   `json:"error"`
		CancelStatus string   `json:"cancelStatus"`
	}
	type result struct {
		ServerTasks *struct {
			List     *struct{} `json:"list"`
			Cancel   *struct{} `json:"cancel"`
			Requests struct {
				Tools struct {
					Call *struct{} `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"serverTasks"`
		TaskSupport map[string]*string `json:"taskSupport"`
		Run         run                `json:"run"`
		Cancel      run                `json:"cancel"`
		List        []struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"list"`
		OtherGet   string `json:"otherGet"`
		OtherList  int    `json:"otherList"`
		Background struct {
			Messages, Statuses  []string
			TaskID, Text, Error string
			Status              string
		} `json:"background"`
		PlainTasks       json.RawMessage `json:"plainTasks"`
		PlainTaskSupport int             `json:"plainTaskSupport"`
		PlainText        string          `json:"plainText"`
	}
	check := func(t *testing.T, marker string, args ...string) {
		// Bounded: a task that is never cancelled would be polled for ever.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"tasks.mjs"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("node tasks client: %v\n%s\n%s", err, out, stderr)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if st := r.ServerTasks; st == nil || st.List == nil || st.Cancel == nil || st.Requests.Tools.Call == nil {
			t.Errorf("server tasks capability: %s", out)
		}
		for _, name := range []string{"bash", "job_output", "job_kill"} {
			if s := r.TaskSupport[name]; s == nil || *s != "optional" {
				t.Errorf("tool %s: taskSupport %v, want optional", name, s)
			}
		}
		// Created, polled while working, then completed with the result.
		ms := strings.Join(r.Run.Messages, ",")
		if !strings.HasPrefix(ms, "taskCreated,taskStatus") || !strings.HasSuffix(ms, "taskStatus,result") || r.Run.Error != "" {
			t.Errorf("task messages %s (error %q)", ms, r.Run.Error)
		}
		if len(r.Run.Statuses) < 2 || r.Run.Statuses[0] != "working" || r.Run.Statuses[len(r.Run.Statuses)-1] != "completed" {
			t.Errorf("task statuses %v, want working ... completed", r.Run.Statuses)
		}
		if r.Run.Text != "done" {
			t.Errorf("task result %q, want done", r.Run.Text)
		}
		// A background command: working while its job runs, then its output.
		bs := r.Background.Statuses
		if len(bs) < 2 || bs[0] != "working" || bs[len(bs)-1] != "completed" || !strings.Contains(r.Background.Text, "bg1\nbg2\nbg3") || r.Background.Status != "completed" || r.Background.Error != "" {
			t.Errorf("background task: %+v", r.Background)
		}
		// Cancelled while it ran: the command is gone well before its sleep ends.
		if r.Cancel.CancelStatus != "cancelled" || !strings.Contains(r.Cancel.Error, "was cancelled") || strings.Contains(strings.Join(r.Cancel.Messages, ","), "result") {
			t.Errorf("cancelled task: %+v", r.Cancel)
		}
		waitGone(t, "sleep "+marker, 10*time.Second)
		if len(r.List) != 3 || r.List[0].TaskID != r.Run.TaskID || r.List[0].Status != "completed" || r.List[1].TaskID != r.Background.TaskID || r.List[2].TaskID != r.Cancel.TaskID || r.List[2].Status != "cancelled" {
			t.Errorf("tasks/list %+v", r.List)
		}
		if !strings.Contains(r.OtherGet, "no task") || r.OtherList != 0 {
			t.Errorf("another session: get %q, list %d", r.OtherGet, r.OtherList)
		}
		if string(r.PlainTasks) != "null" || r.PlainTaskSupport != 0 || r.PlainText != "plain" {
			t.Errorf("a client without tasks: tasks %s, tools with execution %d, call %q", r.PlainTasks, r.PlainTaskSupport, r.PlainText)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		marker := strconv.Itoa(500000 + os.Getpid()%99999)
		check(t, marker, "stdio", marker, filepath.Join(binDir, "dsh"), "serve", comp(t, toolsComp))
	})
	t.Run("http", func(t *testing.T) {
		url, token, _ := serveHTTPForTest(t)
		marker := strconv.Itoa(550000 + os.Getpid()%99999)
		check(t, marker, "http", marker, url, token)
	})
}
