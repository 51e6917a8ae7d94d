// Command dsh-terminal-kubernetes is a ctx.terminals backend whose sessions
// are an interactive bash (or POSIX sh) in a container of a Kubernetes
// pod, reached through a TTY exec, as `kubectl exec -it` does: tool-terminal
// and tool-bash-persistent work in the pod as they do on this machine.
//
// It starts each session on a terminal of ctx.subprocess, like
// terminal-bash, but the program there is a relay: this binary with the
// first argument relay, which puts the terminal in raw mode, opens the
// exec (WebSocket, or SPDY where the API server cannot upgrade to it),
// copies the terminal to it and it to the terminal, hands each size the
// terminal takes to the container's terminal, and exits with the shell's
// exit status (255 when the connection ended without one, after a line
// that says why). Its processes in the container are marked
// (kubeexec.MarkerVar), and a second exec beside the shell's, whose input
// ends with the relay, ends them all then: a runtime leaves an exec's
// processes running when its client goes. The session lives on across
// this plugin's reloads and crashes, as the relay is the host's process,
// not this plugin's.
//
// Config (the pod's keys are kubeexec.Target's):
//
//	name           the backend name (kubernetes)
//	kubeconfig     the kubeconfig file (~/.kube/config: a plugin's
//	               environment has no KUBECONFIG, so name another here)
//	context        the kubeconfig context (its current one)
//	inCluster      use the service account of the pod dsh runs in, not a
//	               kubeconfig
//	namespace      the pod's namespace (the context's, else default)
//	pod            the pod, or
//	labelSelector  a label selector: each session opens in the first
//	               running pod, by name, that it matches then, and stays
//	               in that pod
//	container      the container (the pod's default-container
//	               annotation, else its first)
//	shell          bash (the default, and the dialect
//	               tool-bash-persistent needs) or sh
//	cwd            where sessions start in the container (the
//	               container's working directory)
//	term           TERM in the container (xterm-256color)
//
// What the image needs: sh, and bash for shell bash (an exec carries no
// environment, so a POSIX sh sets TERM, changes directory and becomes the
// shell), and /dev/fd (the rc text comes on fd 3, from a here-document).
// Nothing of dsh's runs in the pod. What the cluster needs: the account
// may get pods (and list them, for a labelSelector) and create pods/exec.
//
// How it differs from a local shell:
//
//   - Wait reasons. The registry tells stdin_read from the local /proc,
//     and the shell runs on another machine. The relay's foreground stage
//     reads nothing (a child in a session of its own does the copying),
//     so the registry finds no read of the terminal and a send settles as
//     inferred_idle once the output is quiet for its idle bound, or
//     timeout: a program in the pod that waits for input looks like one
//     that is quiet. A run (tool-bash-persistent) ends at its end marker,
//     so a command that waits for input there runs to its timeout.
//   - Signals. A signal for the foreground becomes the key the
//     container's terminal turns into it: SIGINT is Ctrl-C, SIGTSTP
//     Ctrl-Z (and SIGQUIT Ctrl-\). No signal can be sent into the pod, so
//     SIGTERM and SIGHUP end the exec, as they end kubectl's: the session
//     exits with 128 and the signal's number, after a line that says so.
//     What the pod's runtime does with a shell whose exec ended is its
//     own (most end it with a hangup). SIGKILL for the foreground is
//     refused, as the relay is the foreground. A wait's detail names the
//     relay (dsh-terminal-kubernetes), not the program in the pod.
//   - The working directory. The host checks a directory an open names on
//     this machine before the backend sees it; here it is a directory in
//     the container.
//   - The prompt's nonce is on the sh's command line in the container for
//     the moment before it becomes the shell, and in the API server's
//     record of the exec request where it keeps one.
//   - The DSH_* facts of ctx.shellEnv, when composed, are exported in the
//     shell; the host's sandbox does not reach into the pod.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/plugins/lib/kubeexec"
	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
	"github.com/dshrun/dsh/sdk"
)

// config is terminal-kubernetes's config: the pod's (kubeexec.Target),
// and the sessions'.
type config struct {
	kubeexec.Target
	Name  string `json:"name" default:"kubernetes" pattern:"^[A-Za-z0-9._-]{1,64}$" desc:"the backend name sessions are opened with (kubernetes)"`
	Shell string `json:"shell" default:"bash" pattern:"^(bash|sh)$" desc:"the shell in the container: bash, or sh"`
	Cwd   string `json:"cwd" desc:"where sessions start in the container (its working directory)"`
	Term  string `json:"term" default:"xterm-256color" desc:"TERM in the container (xterm-256color)"`
}

type terminalKubernetes struct {
	cfg  config
	conn *kubeexec.Conn // the cluster; the API server is asked at each open
	sub  *subprocess.Client
	env  *shellenv.Follower // ctx.shellEnv, when composed
}

var _ termbackend.Backend = (*terminalKubernetes)(nil)

func (p *terminalKubernetes) Describe() sdk.Description {
	return sdk.Description{
		Name:         "terminal-kubernetes",
		Version:      "0.1.0",
		Summary:      "a ctx.terminals backend: interactive bash (or sh) sessions in a container of a Kubernetes pod",
		Inject:       []sdk.Inject{{Key: subprocess.Key}, {Key: terminals.Key}, {Key: shellenv.Key, Optional: true}},
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (p *terminalKubernetes) Dispose(context.Context) error {
	if p.env != nil {
		p.env.Close()
	}
	return nil
}

func (p *terminalKubernetes) Register(s *grpc.Server) {
	terminalv1.RegisterBackendServer(s, termbackend.NewServer(p))
}

func (p *terminalKubernetes) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	// A kubeconfig that cannot be read is a fault of the composition, told
	// now; the cluster itself is asked only when a session opens.
	conn, err := kubeexec.Connect(cfg.Target)
	if err != nil {
		return err
	}
	p.conn = conn
	p.cfg = cfg
	p.sub = subprocess.NewClient(host.Conn(subprocess.Key))
	p.env = shellenv.NewClient(host.Conn(shellenv.Key)).Follow()
	return terminals.NewClient(host.Conn(terminals.Key)).RegisterBackend(ctx, cfg.Name, cfg.Shell)
}

// resolveTimeout bounds the questions an open asks the API server.
const resolveTimeout = 20 * time.Second

func (p *terminalKubernetes) Start(ctx context.Context, req *termbackend.StartRequest) (*termbackend.Started, error) {
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	pod, container, err := p.conn.Pick(rctx)
	cancel()
	if err != nil {
		return nil, termbackend.CannotStart(err)
	}
	// The relay opens the exec in the pod picked now, whatever the
	// selector matches later: the session's shell is there.
	t := p.conn.Target
	t.Namespace, t.Pod, t.LabelSelector, t.Container = p.conn.Namespace, pod.Name, "", container
	if !t.InCluster && t.Kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		// The relay's environment is the host's, whose KUBECONFIG could
		// name another cluster: it reads the file this plugin read.
		t.Kubeconfig = clientcmd.RecommendedHomeFile
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = p.cfg.Cwd
	}
	shown := cwd // the session's directory as the registry shows it
	for _, c := range pod.Spec.Containers {
		if shown == "" && c.Name == container {
			// Where the exec starts, when the pod says (else the image's
			// WORKDIR, which only the node knows).
			shown = c.WorkingDir
		}
	}
	facts := map[string]string{}
	snap, err := p.env.Snapshot(ctx)
	switch {
	case errors.Is(err, sdk.ErrNotProvided):
		// No ctx.shellEnv composed: no facts.
	case err != nil:
		return nil, termbackend.CannotStart(fmt.Errorf("the DSH_* environment could not be read: %w", err))
	default:
		facts = snap.Env
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	ps1, printed := Prompt(p.cfg.Shell, nonce)
	id := kubeexec.NewID()
	spec, err := json.Marshal(relaySpec{Target: t, ID: id, Command: Command(p.cfg.Shell, p.cfg.Term, cwd, RC(p.cfg.Shell, ps1, facts), nonce, id)})
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, termbackend.CannotStart(fmt.Errorf("the relay (this plugin's binary) cannot be found: %w", err))
	}
	st, err := p.sub.SpawnTerminal(ctx, &subprocess.TerminalRequest{
		Argv: RelayArgv(self),
		Dir:  "/",
		Env:  map[string]string{specVar: string(spec)},
		Cols: req.Cols,
		Rows: req.Rows,
	})
	if err != nil {
		if errors.Is(err, subprocess.ErrCannotStart) || errors.Is(err, subprocess.ErrInvalid) {
			return nil, termbackend.CannotStart(err)
		}
		return nil, err
	}
	return &termbackend.Started{
		ProcessId: st.Id,
		Pid:       st.Pid,
		Cwd:       shown,
		Dialect:   &termbackend.Dialect{Name: p.cfg.Shell, Prompt: printed},
	}, nil
}

// specVar carries a session's relay spec to the sh that starts the relay.
const specVar = "DSH_KUBERNETES_RELAY"

// RelayArgv is the program a session's terminal runs: a POSIX sh that
// takes the relay's spec from the environment variable specVar, drops the
// variable and becomes the relay with the spec on fd 3 (a here-document),
// so the spec (the prompt's nonce in it) is not in the relay's
// environment, nor its children's.
func RelayArgv(self string) []string {
	return []string{"/bin/sh", "-c",
		`r=$` + specVar + `;unset ` + specVar + `;exec "$0" ` + argRelay + ` 3<<E` + "\n$r\nE\n", self}
}

// Send types text, then Enter (a carriage return, as a terminal sends it)
// when it is submitted.
func (p *terminalKubernetes) Send(ctx context.Context, req *termbackend.SendRequest) (bool, error) {
	data := req.Text
	if req.Submit {
		data += "\r"
	}
	written, err := p.sub.WriteTerminal(ctx, req.ProcessId, []byte(data))
	if errors.Is(err, subprocess.ErrNotFound) || errors.Is(err, subprocess.ErrInvalid) {
		return false, termbackend.NotFound(err)
	}
	return written, err
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case argRelay:
			os.Exit(relay())
		case argCopy:
			os.Exit(relayCopy())
		}
	}
	kubeexec.Quiet()
	sdk.Serve(&terminalKubernetes{})
}
