package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/plugins/lib/kubeexec"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// config is the executor's config: the shared executor keys and the
// target's.
type config struct {
	localexec.Config
	kubeexec.Target
}

// executor is localexec's executor with the pod's rules: the working
// directory is the container's (never looked at here), and each command
// is a relay (confine rewrites the spawn request).
type executor struct {
	*localexec.Executor

	mu   sync.Mutex
	cwd  string // the config's, in the container ("" is the container's own)
	conn *kubeexec.Conn
	self string // this binary, the relay
	// shell is what the probe found: "" not asked yet, "bash" or "sh".
	shell string
}

func newPlugin() *localexec.Plugin {
	e := &executor{}
	e.Executor = &localexec.Executor{
		Argv:    localexec.BashArgv, // replaced by confine
		Confine: e.confine,
		Own:     &localexec.OwnConfig{Schema: sdk.SchemaOf[config](), Parse: e.parse},
	}
	return &localexec.Plugin{
		Name:    "bash-kubernetes",
		Version: "0.1.0",
		Summary: "ctx.shell: fresh bash -c processes in a Kubernetes pod's container, through pods/exec",
		Exec:    e.Executor,
		Serve:   e,
	}
}

var _ shell.Executor = (*executor)(nil)

func (e *executor) parse(raw json.RawMessage) (localexec.Config, func(), error) {
	c, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return localexec.Config{}, nil, err
	}
	cwd := c.Cwd
	if cwd != "" && !path.IsAbs(cwd) && !strings.HasPrefix(cwd, "~") {
		return localexec.Config{}, nil, fmt.Errorf("config: cwd %q is not an absolute path in the container", cwd)
	}
	if cwd != "" && !strings.HasPrefix(cwd, "~") {
		cwd = path.Clean(cwd)
	}
	// The shared keys are checked and defaulted as every executor's; the
	// working directory is the container's, so the host's is never asked.
	shared := c.Config
	shared.Cwd = "/"
	b, err := json.Marshal(shared)
	if err != nil {
		return localexec.Config{}, nil, err
	}
	cfg, err := localexec.ParseConfig(b)
	if err != nil {
		return localexec.Config{}, nil, err
	}
	cfg.Cwd = cwd
	cfg.MaxProcesses, cfg.MaxMemoryBytes = -1, -1 // the pod's limits apply, not dsh's
	t := c.Target
	if !t.InCluster && t.Kubeconfig == "" {
		// The relay reads the same file as this process does, whatever
		// its environment.
		t.Kubeconfig = clientcmd.RecommendedHomeFile
	}
	conn, err := kubeexec.Connect(t)
	if err != nil {
		return localexec.Config{}, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return localexec.Config{}, nil, fmt.Errorf("the relay (this binary) cannot be found: %w", err)
	}
	return cfg, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.cwd, e.conn, e.self, e.shell = cwd, conn, self, ""
	}, nil
}

func (e *executor) state() (*kubeexec.Conn, string, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn, e.cwd, e.self
}

// Resolve is localexec's, with the working directory the container's: a
// relative one is under the config's cwd (or the container's own), and a
// leading ~ is the container's home unless the caller's env sets HOME. It
// asks the container once whether it has bash; where it has not, the
// command's SHELL says sh, as that is what runs it.
func (e *executor) Resolve(ctx context.Context, req *shell.ExecRequest) (*shell.ExecSpec, error) {
	if strings.ContainsRune(req.Command, 0) {
		// The shell in the pod would run it cut short at the NUL.
		return nil, shell.Invalid("The command holds a NUL character, which a shell cannot take.")
	}
	r := proto.Clone(req).(*shell.ExecRequest)
	r.Workdir = ""
	spec, err := e.Executor.Resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	_, cwd, _ := e.state()
	wd := req.Workdir
	switch {
	case wd == "":
		wd = cwd
	case wd == "~" || strings.HasPrefix(wd, "~/"):
		if home := req.Env["HOME"]; home != "" {
			wd = path.Join(home, wd[1:])
		}
	case !path.IsAbs(wd) && !strings.HasPrefix(wd, "~") && cwd != "":
		wd = path.Join(cwd, wd)
	}
	if wd != "" && !strings.HasPrefix(wd, "~") {
		wd = path.Clean(wd)
	}
	spec.Workdir = wd
	spec.MaxProcesses, spec.MaxMemoryBytes = -1, -1
	if e.probe(ctx, spec.TimeoutMs) == "sh" {
		if _, set := spec.Env["SHELL"]; !set {
			spec.Env = maps.Clone(spec.Env)
			if spec.Env == nil {
				spec.Env = map[string]string{}
			}
			spec.Env["SHELL"] = "sh"
		}
	}
	return spec, nil
}

// probe is the container's shell, bash or sh, asked once per config; ""
// while the pod cannot be reached (the command then says why). It waits
// half the command's lookup time at most: the pod lookup for the command
// itself has the whole.
func (e *executor) probe(ctx context.Context, timeoutMs int64) string {
	e.mu.Lock()
	sh, conn := e.shell, e.conn
	e.mu.Unlock()
	if sh != "" || conn == nil {
		return sh
	}
	ctx, cancel := lookupContext(ctx, timeoutMs/2)
	defer cancel()
	pod, container, err := conn.Pick(ctx)
	if err != nil {
		return ""
	}
	code, err := conn.Exec(ctx, pod.Name, container, kubeexec.ExecOptions{Command: []string{"sh", "-c", "command -v bash >/dev/null 2>&1"}, Stdout: io.Discard})
	switch {
	case err != nil:
		return ""
	case code == 0:
		sh = "bash"
	default:
		sh = "sh"
	}
	e.mu.Lock()
	if e.conn == conn {
		e.shell = sh
	}
	e.mu.Unlock()
	return sh
}

// Exec is Resolve then Run, with this executor's Resolve.
func (e *executor) Exec(ctx context.Context, req *shell.ExecRequest) (*shell.RunResult, error) {
	spec, err := e.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, spec)
}

// Limits are localexec's, with the container's working directory.
func (e *executor) Limits(ctx context.Context) (*shell.Limits, error) {
	l, err := e.Executor.Limits(ctx)
	if err != nil {
		return nil, err
	}
	_, cwd, _ := e.state()
	l.Workdir = cwd
	return l, nil
}

// confine makes the spawn request a relay's: it picks the pod, and hands
// the relay the command, its explicit environment and its input on
// descriptor 3. The relay itself runs in a directory of this machine with
// no environment of the command's (none of it is for this machine).
func (e *executor) confine(ctx context.Context, spec *shell.ExecSpec, req *subprocessv1.SpawnRequest) (*shell.SandboxInfo, error) {
	conn, _, self := e.state()
	if conn == nil {
		return nil, shell.CannotRun("The Kubernetes executor has no config yet.")
	}
	lctx, cancel := lookupContext(ctx, spec.TimeoutMs)
	defer cancel()
	pod, container, err := conn.Pick(lctx)
	if err != nil {
		return nil, shell.CannotRun(err.Error())
	}
	job, err := json.Marshal(kubeexec.Job{
		Target:    conn.Target,
		Pod:       pod.Name,
		UID:       string(pod.UID),
		Container: container,
		ID:        kubeexec.NewID(),
		Dir:       spec.Workdir,
		Command:   spec.Command,
		Env:       req.Env,
		Stdin:     spec.Stdin,
		GraceMs:   spec.GraceMs,
	})
	if err != nil {
		return nil, err
	}
	req.Argv = []string{self, kubeexec.RelayArg}
	req.Script = job
	req.Env = nil
	req.Dir = os.TempDir()
	req.Stdin, req.HasStdin = nil, false
	req.MaxProcesses, req.MaxMemoryBytes = 0, 0
	return nil, nil
}

// lookupMax is the longest the pod lookup before a command waits for the
// API server, whatever the command's timeout.
const lookupMax = 20 * time.Second

// lookupContext bounds a lookup before a command by the command's timeout
// (and lookupMax): a stopped API server is said to be unreachable no later
// than the command would have timed out.
func lookupContext(ctx context.Context, timeoutMs int64) (context.Context, context.CancelFunc) {
	d := lookupMax
	if t := time.Duration(timeoutMs) * time.Millisecond; t > 0 && t < d {
		d = t
	}
	return context.WithTimeout(ctx, d)
}
