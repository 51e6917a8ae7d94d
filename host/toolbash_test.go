//go:build unix

package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/plugins/shell"
)

// The bash tool through the real plugins: dsh-tool-bash consumes ctx.shell
// (dsh-bash-local), ctx.shellEnv (dsh-shell-env), ctx.jobs and ctx.tools.

const toolsYAML = `
settings:
  shell:
    graceMs: 200
    maxOutputBytes: 2000
plugins:
  - id: env
    name: shell-env
    config:
      facts: {DSH_PROJECT: demo}
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

func startTools(t *testing.T, yaml string) *Host {
	t.Helper()
	return startHost(t, writeComp(t, yaml))
}

// readJobToEnd reads a job with job_output until it reports its end and
// returns everything read.
func readJobToEnd(t *testing.T, h *Host, owner, id string) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := callTool(t, h, owner, "job_output", map[string]string{"job_id": id})
		all.WriteString(r.Text + "\n")
		if strings.Contains(r.Text, "finished]") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return all.String()
}

func callTool(t *testing.T, h *Host, owner, tool string, args any) *ToolResult {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.CallTool(ctx, ToolCall{Owner: owner, Tool: tool, Arguments: b})
	if err != nil {
		t.Fatalf("%s %s: %v", tool, b, err)
	}
	return res
}

type bashArgs map[string]any

func bashCall(cmd string, more ...any) bashArgs {
	a := bashArgs{"command": cmd, "description": "test"}
	for i := 0; i+1 < len(more); i += 2 {
		a[more[i].(string)] = more[i+1]
	}
	return a
}

func TestToolBashMarkers(t *testing.T) {
	h := startTools(t, toolsYAML)
	names := []string{}
	for _, ti := range h.Tools() {
		names = append(names, ti.Name+"@"+ti.Plugin)
	}
	if strings.Join(names, ",") != "bash@tools,job_kill@tools,job_list@tools,job_output@tools" {
		t.Fatalf("tools: %v", names)
	}
	cases := []struct {
		args     bashArgs
		text     string
		isError  bool
		exitCode int
		signal   string
		timedOut bool
	}{
		{bashCall("echo hi"), "hi", false, 0, "", false},
		{bashCall("echo out; echo err >&2; exit 3"), "out\n[stderr]\nerr\n[exit code: 3]", true, 3, "", false},
		{bashCall("exit 3"), "[exit code: 3]", true, 3, "", false},
		{bashCall("echo -n tick; sleep 5", "timeoutMs", 300), "tick\n[timed out after 300ms]\n[killed by signal: SIGTERM]", true, 0, "SIGTERM", true},
		{bashCall("kill -KILL $$"), "[killed by signal: SIGKILL]", true, 0, "SIGKILL", false},
		{bashCall(`echo "$DSH_PROJECT $DSH_HOME"`), "demo /srv/dsh-home", false, 0, "", false},
	}
	for _, tc := range cases {
		res := callTool(t, h, "agent", "bash", tc.args)
		if res.Text != tc.text || res.IsError != tc.isError {
			t.Errorf("%v:\n got %q (isError %v)\nwant %q (isError %v)", tc.args["command"], res.Text, res.IsError, tc.text, tc.isError)
		}
		st := shell.ParseExitStatus(res.Text)
		if st.ExitCode != tc.exitCode || st.Signal != tc.signal {
			t.Errorf("%v: parsed %+v", tc.args["command"], st)
		}
		var facts struct {
			ExitCode *int   `json:"exitCode"`
			Signal   string `json:"signal"`
			TimedOut bool   `json:"timedOut"`
		}
		if err := json.Unmarshal(res.Structured, &facts); err != nil {
			t.Fatal(err)
		}
		if facts.TimedOut != tc.timedOut || facts.Signal != tc.signal || (tc.signal == "" && (facts.ExitCode == nil || *facts.ExitCode != tc.exitCode)) {
			t.Errorf("%v: structured %s", tc.args["command"], res.Structured)
		}
	}
}

// What the model reads when its request cannot run as asked, and a workdir
// under the home directory.
func TestToolBashRefusalsAndHome(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(home+"/src", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home) // the host's, so the executor's and the command's
	h := startTools(t, toolsYAML)
	for _, tc := range []struct {
		args bashArgs
		text string
	}{
		{bashCall("   "), "[There is no command to run: the command is empty.]"},
		{bashCall("pwd", "workdir", "~"), home},
		{bashCall("pwd", "workdir", "~/src"), home + "/src"},
		{bashCall("pwd", "workdir", "~/missing"), "[workdir " + home + "/missing does not exist]"},
		{bashCall("pwd", "workdir", "~no-such-user-here/x"), "[The working directory ~no-such-user-here/x starts with ~no-such-user-here, the home directory of user no-such-user-here, and there is no such user here.]"},
	} {
		res := callTool(t, h, "agent", "bash", tc.args)
		if res.Text != tc.text || res.IsError != strings.HasPrefix(tc.text, "[") {
			t.Errorf("%v in %v:\n got %q (isError %v)\nwant %q", tc.args["command"], tc.args["workdir"], res.Text, res.IsError, tc.text)
		}
	}
}

// Long output is cut to its tail; the spill file holds every byte.
func TestToolBashTruncationSpill(t *testing.T) {
	h := startTools(t, toolsYAML)
	res := callTool(t, h, "agent", "bash", bashCall("seq 1 100000"))
	lines := strings.Split(res.Text, "\n")
	last := lines[len(lines)-1]
	prefix := "[output truncated: "
	if !strings.HasPrefix(last, prefix) || lines[len(lines)-2] != "100000" || len(res.Text) > 2200 {
		t.Fatalf("text ends %q", res.Text[max(0, len(res.Text)-200):])
	}
	_, spill, ok := strings.Cut(strings.TrimSuffix(last, "]"), "; full output: ")
	if !ok {
		t.Fatalf("not a complete spill file: %q", last)
	}
	b, err := os.ReadFile(spill)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(b) != want.String() {
		t.Fatalf("spill file holds %d bytes, want %d", len(b), want.Len())
	}
	if !strings.Contains(spill, "/agent/") {
		t.Errorf("spill file %s is not under its owner's folder", spill)
	}
}

func TestToolBashBackgroundJobs(t *testing.T) {
	h := startTools(t, toolsYAML)
	res := callTool(t, h, "agent", "bash", bashCall("for i in $(seq 1 12); do echo n$i; sleep 0.05; done; echo bye >&2; exit 5", "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(res.Structured, &job); err != nil || job.JobID == "" || !strings.Contains(res.Text, "[job "+job.JobID+" started") {
		t.Fatalf("start: %q %s %v", res.Text, res.Structured, err)
	}
	// Several reads: nothing repeated, nothing lost, the end marked.
	var all strings.Builder
	reads := 0
	for {
		r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": job.JobID})
		reads++
		st := shell.ParseExitStatus(r.Text)
		body := st.Body
		if strings.HasSuffix(body, "[job "+job.JobID+" is still running]") {
			all.WriteString(strings.TrimSuffix(body, "[job "+job.JobID+" is still running]"))
			time.Sleep(120 * time.Millisecond)
			continue
		}
		if st.ExitCode != 5 || !strings.HasSuffix(body, "[job "+job.JobID+" finished]") || !r.IsError {
			t.Fatalf("final read: %q", r.Text)
		}
		all.WriteString(strings.TrimSuffix(body, "[job "+job.JobID+" finished]"))
		break
	}
	// Reads with nothing new are empty bodies: compare the lines.
	var gotLines []string
	for _, l := range strings.Split(strings.ReplaceAll(all.String(), "[stderr]\nbye\n", ""), "\n") {
		if l != "" {
			gotLines = append(gotLines, l)
		}
	}
	var want []string
	for i := 1; i <= 12; i++ {
		want = append(want, fmt.Sprintf("n%d", i))
	}
	if strings.Join(gotLines, ",") != strings.Join(want, ",") || reads < 3 || !strings.Contains(all.String(), "[stderr]\nbye") {
		t.Fatalf("%d reads gave %q", reads, all.String())
	}
	// The final read forgot the job.
	r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": job.JobID})
	if !r.IsError || !strings.Contains(r.Text, "no such job") {
		t.Fatalf("read after the end: %q", r.Text)
	}
	// The completion notice reached the owner's next result (or an earlier one).
	// Kill: a long job, killed, its tree gone, a notice for the owner.
	res = callTool(t, h, "agent", "bash", bashCall("sleep 30", "run_in_background", true))
	_ = json.Unmarshal(res.Structured, &job)
	k := callTool(t, h, "agent", "job_kill", map[string]string{"job_id": job.JobID})
	if !strings.Contains(k.Text, "killed") {
		t.Fatalf("kill: %q", k.Text)
	}
	// The notice comes with the owner's next result, which may be the kill's
	// own when the job died before that call returned.
	deadline := time.Now().Add(10 * time.Second)
	var notice string
	for text := k.Text; time.Now().Before(deadline); text = callTool(t, h, "agent", "bash", bashCall("true")).Text {
		if i := strings.Index(text, "[job "+job.JobID+" finished: killed by signal SIGTERM"); i >= 0 {
			notice = text[i:]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if notice == "" {
		t.Fatal("no completion notice for the killed job")
	}
	if k2 := callTool(t, h, "agent", "job_kill", map[string]string{"job_id": job.JobID}); !strings.Contains(k2.Text, "already finished") {
		t.Fatalf("second kill: %q", k2.Text)
	}
}

// One owner cannot see, read or kill another's job.
func TestToolBashOwnerIsolation(t *testing.T) {
	h := startTools(t, toolsYAML)
	res := callTool(t, h, "alice", "bash", bashCall("sleep 30", "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	_ = json.Unmarshal(res.Structured, &job)
	for _, tool := range []string{"job_output", "job_kill"} {
		// Answered word for word as an id nobody has: nothing says the
		// job exists.
		r := callTool(t, h, "mallory", tool, map[string]string{"job_id": job.JobID})
		unknown := callTool(t, h, "mallory", tool, map[string]string{"job_id": "j999"})
		if !r.IsError || !unknown.IsError || r.Text != strings.ReplaceAll(unknown.Text, "j999", job.JobID) {
			t.Fatalf("%s by another owner: %q; of an unknown id: %q", tool, r.Text, unknown.Text)
		}
	}
	if r := callTool(t, h, "alice", "job_output", map[string]string{"job_id": job.JobID}); r.IsError || !strings.Contains(r.Text, "still running") {
		t.Fatalf("owner's read: %q", r.Text)
	}
}

func TestToolArgumentsChecked(t *testing.T) {
	h := startTools(t, toolsYAML)
	var ae *ArgumentsError
	_, err := h.CallTool(context.Background(), ToolCall{Owner: "a", Tool: "bash", Arguments: json.RawMessage(`{"command": 3}`)})
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "/command") {
		t.Fatalf("bad arguments: %v", err)
	}
	_, err = h.CallTool(context.Background(), ToolCall{Owner: "a", Tool: "nosuch"})
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "tools: bash, job_kill, job_list, job_output") {
		t.Fatalf("unknown tool: %v", err)
	}
}

// A tool name is one plugin's: a second registration fails the second
// plugin's apply, naming both.
func TestToolRegisteredTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, writeComp(t, toolsYAML+"  - id: tools2\n    name: tool-bash\n"), testOptions(t, nil))
	if err == nil {
		t.Fatal("a second tool-bash loaded")
	}
	// The two load in parallel: either may be first.
	for _, want := range []string{`tool "bash" is already registered by plugin "tools`, `plugin "tools2"`, `plugin "tools" (`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	assertNoPlugins(t)
}

// A job outlives the plugin that registered it: reloading tool-bash (and
// the executor) keeps it running and readable under its id.
func TestJobsOutliveTheirPlugin(t *testing.T) {
	h := startTools(t, toolsYAML)
	res := callTool(t, h, "agent", "bash", bashCall("echo one; sleep 1; echo two", "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	_ = json.Unmarshal(res.Structured, &job)
	for _, id := range []string{"tools", "bash"} {
		s, _ := h.Registry().Scope(id)
		s.Restart()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Registry().Settled(ctx); err != nil {
		t.Fatal(err)
	}
	if all := readJobToEnd(t, h, "agent", job.JobID); !strings.Contains(all, "one") || !strings.Contains(all, "two") || !strings.Contains(all, "[job "+job.JobID+" finished]") {
		t.Fatalf("after the reload: %q", all)
	}
}

// tool-bash follows ctx.shellEnv with a watch stream. After a reload of
// shell-env (which keeps caller state, so tool-bash is reloaded with it)
// commands see the new provider's facts, and the reload stays well under
// the drain timeout. (Known streams being left out of the drain count is
// pinned by TestMethodKind; no plugin here keeps a watch across a reload
// that keeps its consumers.)
func TestToolBashFollowsShellEnvAcrossReload(t *testing.T) {
	h := startTools(t, toolsYAML)
	if res := callTool(t, h, "a", "bash", bashCall(`echo "$DSH_PROJECT"`)); !strings.HasPrefix(res.Text, "demo") {
		t.Fatalf("before reload: %q", res.Text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Reload(ctx, "env"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("reload of shell-env took %v: the watch stream was waited for like a call", took)
	}
	waitActive(t, h)
	if res := callTool(t, h, "a", "bash", bashCall(`echo "$DSH_PROJECT $DSH_HOME"`)); !strings.HasPrefix(res.Text, "demo ") || res.IsError {
		t.Fatalf("after reload: %q", res.Text)
	}
}

// A background command gets the trusted DSH_* layer as a foreground one
// does: the executor's Resolve carries it into the spec Start runs, and
// nothing in the command's env (or the caller's) displaces it.
func TestToolBashBackgroundGetsTheDshEnv(t *testing.T) {
	h := startTools(t, toolsYAML)
	res := callTool(t, h, "agent", "bash", bashCall(`echo "project=$DSH_PROJECT"`, "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(res.Structured, &job); err != nil || job.JobID == "" {
		t.Fatalf("start: %q %s %v", res.Text, res.Structured, err)
	}
	if out := readJobToEnd(t, h, "agent", job.JobID); !strings.Contains(out, "project=demo\n") {
		t.Fatalf("the job's output: %q", out)
	}
}

// listedJob is a job in job_list's structured content.
type listedJob struct {
	JobID       string `json:"jobId"`
	Status      string `json:"status"`
	ExitCode    *int   `json:"exitCode"`
	Signal      string `json:"signal"`
	Command     string `json:"command"`
	UnreadBytes int64  `json:"unreadBytes"`
}

// listJobs calls job_list as owner: its text, the line of each job by id,
// and each job's structured facts by id.
func listJobs(t *testing.T, h *Host, owner string) (string, map[string]string, map[string]listedJob) {
	t.Helper()
	r := callTool(t, h, owner, "job_list", map[string]any{})
	if r.IsError {
		t.Fatalf("job_list as %s: %q", owner, r.Text)
	}
	var facts struct {
		Jobs []listedJob `json:"jobs"`
	}
	if err := json.Unmarshal(r.Structured, &facts); err != nil {
		t.Fatalf("job_list as %s: structured %s: %v", owner, r.Structured, err)
	}
	lines, jobs := map[string]string{}, map[string]listedJob{}
	for _, l := range strings.Split(r.Text, "\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(l, "[job "), ":"); ok && strings.HasPrefix(l, "[job ") {
			lines[id] = l
		}
	}
	for _, j := range facts.Jobs {
		jobs[j.JobID] = j
	}
	return r.Text, lines, jobs
}

// untilListed polls owner's job_list until ok holds of job id's line and
// facts, and returns them; it fails t after a generous bound.
func untilListed(t *testing.T, h *Host, owner, id, what string, ok func(line string, j listedJob) bool) (string, listedJob) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		text, lines, jobs := listJobs(t, h, owner)
		if l, in := lines[id]; in && ok(l, jobs[id]) {
			return l, jobs[id]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: job %s of %s never listed so; last list:\n%s", what, id, owner, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// job_list through the real plugins: each owner sees its own jobs only,
// how each stands, and the output job_output has not returned yet.
func TestToolBashJobList(t *testing.T) {
	h := startTools(t, toolsYAML)
	start := func(owner, cmd string) string {
		t.Helper()
		res := callTool(t, h, owner, "bash", bashCall(cmd, "run_in_background", true))
		var job struct {
			JobID string `json:"jobId"`
		}
		if err := json.Unmarshal(res.Structured, &job); err != nil || job.JobID == "" {
			t.Fatalf("start %q as %s: %q %s", cmd, owner, res.Text, res.Structured)
		}
		return job.JobID
	}
	trigger := t.TempDir() + "/more"
	// talker prints 6 bytes, then 100 more once trigger exists.
	talker := start("alice", `echo hello; while [ ! -e `+trigger+` ]; do sleep 0.05; done; printf '%0100d' 0; sleep 30`)
	failing := start("alice", "echo done2; exit 3")
	sleeper := start("alice", "sleep 30")
	bobs := start("bob", "sleep 31")

	// Each owner lists its own jobs, never the other's.
	untilListed(t, h, "alice", failing, "alice's finished job", func(_ string, j listedJob) bool { return j.Status == "completed" })
	text, lines, jobs := listJobs(t, h, "alice")
	if len(lines) != 3 || len(jobs) != 3 || lines[talker] == "" || lines[failing] == "" || lines[sleeper] == "" || strings.Contains(text, bobs) {
		t.Fatalf("alice's list:\n%s\n%v", text, jobs)
	}
	text, lines, jobs = listJobs(t, h, "bob")
	if len(lines) != 1 || len(jobs) != 1 || !strings.Contains(lines[bobs], "running, started ") || jobs[bobs].Command != "sleep 31" || !strings.HasSuffix(lines[bobs], "] sleep 31") {
		t.Fatalf("bob's list:\n%s\n%v", text, jobs)
	}
	if text, _, _ := listJobs(t, h, "carol"); text != "[you have no background jobs: none is running, and every finished one's output was read to its end]" {
		t.Fatalf("carol's list: %q", text)
	}

	// The running job's unread output: what it printed, none once read,
	// then what it printed since.
	untilListed(t, h, "alice", talker, "the first 6 bytes unread", func(l string, j listedJob) bool {
		return j.UnreadBytes == 6 && strings.Contains(l, "; 6 bytes of output not read yet]")
	})
	if r := callTool(t, h, "alice", "job_output", map[string]string{"job_id": talker}); r.Text != "hello\n[job "+talker+" is still running]" {
		t.Fatalf("read: %q", r.Text)
	}
	_, lines, jobs = listJobs(t, h, "alice")
	if j := jobs[talker]; j.UnreadBytes != 0 || j.Status != "running" || !strings.Contains(lines[talker], "running, started ") || !strings.Contains(lines[talker], "; all its output read]") {
		t.Fatalf("after the read: %q %+v", lines[talker], j)
	}
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	untilListed(t, h, "alice", talker, "100 more bytes unread", func(l string, j listedJob) bool {
		return j.UnreadBytes == 100 && strings.Contains(l, "; 100 bytes of output not read yet]")
	})

	// The finished job: its exit code, its output not read yet.
	if l, j := untilListed(t, h, "alice", failing, "the finished job", func(_ string, j listedJob) bool { return j.Status == "completed" }); j.ExitCode == nil || *j.ExitCode != 3 || j.UnreadBytes != 6 ||
		!strings.HasPrefix(l, "[job "+failing+": exited with code 3 after ") || !strings.HasSuffix(l, "; 6 bytes of output not read yet] echo done2; exit 3") {
		t.Fatalf("finished job: %q %+v", l, j)
	}

	// The killed job.
	if k := callTool(t, h, "alice", "job_kill", map[string]string{"job_id": sleeper}); !strings.Contains(k.Text, "killed") {
		t.Fatalf("kill: %q", k.Text)
	}
	if l, j := untilListed(t, h, "alice", sleeper, "the killed job", func(_ string, j listedJob) bool { return j.Status != "running" }); j.Status != "killed" || j.Signal != "SIGTERM" ||
		!strings.HasPrefix(l, "[job "+sleeper+": killed by signal SIGTERM after ") {
		t.Fatalf("killed job: %q %+v", l, j)
	}

	// The final read forgets the finished job: it is listed no more.
	if all := readJobToEnd(t, h, "alice", failing); !strings.Contains(all, "done2") || !strings.Contains(all, "[exit code: 3]") {
		t.Fatalf("final read: %q", all)
	}
	text, lines, jobs = listJobs(t, h, "alice")
	if _, in := lines[failing]; in || len(jobs) != 2 || strings.Contains(text, "[job "+failing+":") {
		t.Fatalf("after the final read:\n%s", text)
	}
	// Bob's job was never alice's to see, nor is it touched.
	if _, lines, _ := listJobs(t, h, "bob"); !strings.Contains(lines[bobs], "running") {
		t.Fatalf("bob's job: %q", lines[bobs])
	}
}
