// Command dsh-bash-kubernetes is a POSIX executor in a Kubernetes pod: it
// provides ctx.shell by running each command in one container of a pod,
// through the API server's pods/exec (as kubectl exec does), as a fresh
// `bash -c` (`sh -c` where the image has no bash).
//
// Each command is a local relay process started through ctx.subprocess:
// this binary run as `dsh-bash-kubernetes relay`, which is given the
// command on descriptor 3, runs it in the pod, copies its output and exits
// with its exit code. So timeouts, cancel, output caps and spill files,
// background jobs (which outlive a reload of this executor) and the
// host's stop all work as for bash-local. Stopping a relay ends the
// command's whole tree in the container (setsid children too): every
// process of it carries DSH_EXEC_ID=<id> in its environment, and a script
// needing only sh, tr and kill (and grep, where installed, to scan the
// container's processes in one pass) finds and kills them (TERM, the grace,
// KILL). A relay killed outright ends its connection, and with it the
// exec's stdin: a watcher in the container then does the same. A pod
// deleted or a connection lost is a sentence on stderr, exit code 255.
//
// Config (the `shell` settings, overlaid with the entry's config):
//
//	kubeconfig     kubeconfig file; empty is ~/.kube/config
//	context        kubeconfig context; empty is its current context
//	inCluster      use the service account of the pod dsh runs in
//	namespace      the pod's namespace; empty is the context's, else default
//	pod            the pod commands run in, or
//	labelSelector  pick the first running pod (by name) it matches, at each command
//	container      the container; empty is the pod's default container
//	cwd            default working directory in the container; empty is the container's
//	timeoutMs, maxTimeoutMs, maxOutputBytes, maxSpillBytes, graceMs: as bash-local
//	(maxProcesses and maxMemoryBytes do not apply: the pod's own limits do)
//
// The account needs, in the pod's namespace: create on pods/exec, and get
// and list on pods. For example:
//
//	rules:
//	- apiGroups: [""]
//	  resources: ["pods"]
//	  verbs: ["get", "list"]
//	- apiGroups: [""]
//	  resources: ["pods/exec"]
//	  verbs: ["create"]
//
// The commands get the environment the executor builds (the model-friendly
// overrides, the caller's env, the DSH_* facts) and the container's own;
// nothing of this machine's environment is sent. Where the image has no
// bash, sh runs the commands, and the executor's resolve says so: the
// command's SHELL is sh (unless the caller sets SHELL).
//
// The relays read the kubeconfig with this machine's environment as the
// host gives it to commands (credentials withheld): a kubeconfig whose
// user is an exec credential plugin needing such a variable cannot
// authenticate; a token, a certificate or a token file can.
package main

import (
	"os"

	"github.com/dshrun/dsh/plugins/lib/kubeexec"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == kubeexec.RelayArg {
		os.Exit(kubeexec.Relay(os.NewFile(3, "job"), os.Stdout, os.Stderr))
	}
	kubeexec.Quiet()
	sdk.Serve(newPlugin())
}
