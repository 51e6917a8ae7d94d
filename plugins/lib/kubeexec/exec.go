package kubeexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// DefaultContainerAnnotation names a pod's default container, as kubectl
// reads it.
const DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// Pick is the pod and container commands run in: the named pod, or the
// first running pod by name that the selector matches, and the
// configured container or the pod's default. A pod that is not running,
// or a container that is not there or not running, is an error of one
// plain sentence.
func (c *Conn) Pick(ctx context.Context) (*corev1.Pod, string, error) {
	var pod *corev1.Pod
	if c.Target.Pod != "" {
		p, err := c.pod(ctx, c.Target.Pod)
		if err != nil {
			return nil, "", c.Explain(err, c.Target.Pod, c.Target.Container)
		}
		pod = p
	} else {
		list := &corev1.PodList{}
		err := c.Core.Get().Namespace(c.Namespace).Resource("pods").
			VersionedParams(&metav1.ListOptions{LabelSelector: c.Target.LabelSelector}, coreParams).
			Do(ctx).Into(list)
		if err != nil {
			return nil, "", c.Explain(err, "", c.Target.Container)
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				if _, err := containerOf(p, c.Target.Container); err == nil {
					pod = p
					break
				}
			}
		}
		if pod == nil {
			return nil, "", sentence("No running pod in namespace %s matches the label selector %s (%d matched).", c.Namespace, c.Target.LabelSelector, len(list.Items))
		}
	}
	if pod.DeletionTimestamp != nil {
		return nil, "", sentence("The pod %s/%s is being deleted.", pod.Namespace, pod.Name)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return nil, "", sentence("The pod %s/%s is not running (its phase is %s).", pod.Namespace, pod.Name, pod.Status.Phase)
	}
	name, err := containerOf(pod, c.Target.Container)
	return pod, name, err
}

// containerOf is the container of pod that commands run in: want, or the
// pod's default; it must be running.
func containerOf(pod *corev1.Pod, want string) (string, error) {
	if want == "" {
		want = pod.Annotations[DefaultContainerAnnotation]
	}
	if want == "" && len(pod.Spec.Containers) > 0 {
		want = pod.Spec.Containers[0].Name
	}
	found := false
	var names []string
	for _, ct := range pod.Spec.Containers {
		names = append(names, ct.Name)
		found = found || ct.Name == want
	}
	if !found {
		return "", sentence("The pod %s/%s has no container %s (its containers: %v).", pod.Namespace, pod.Name, want, names)
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == want && st.State.Running == nil {
			return "", sentence("The container %s of pod %s/%s is not running.", want, pod.Namespace, pod.Name)
		}
	}
	return want, nil
}

// ExecOptions are one exec's command and streams. Stdin, Stdout and
// Stderr may be nil; with TTY, Stderr is unused (the terminal merges the
// streams) and Resize, if set, carries the terminal's sizes.
type ExecOptions struct {
	Command []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	TTY     bool
	Resize  remotecommand.TerminalSizeQueue
}

// Executor is the exec client for one pod's container: WebSocket, falling
// back to SPDY where the API server cannot upgrade to it (as kubectl).
func (c *Conn) Executor(pod, container string, o ExecOptions) (remotecommand.Executor, error) {
	req := c.Core.Post().
		Resource("pods").Namespace(c.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   o.Command,
			Stdin:     o.Stdin != nil,
			Stdout:    o.Stdout != nil,
			Stderr:    o.Stderr != nil && !o.TTY,
			TTY:       o.TTY,
		}, coreParams)
	u := req.URL()
	ws, err := remotecommand.NewWebSocketExecutor(c.Config, http.MethodGet, u.String())
	if err != nil {
		return nil, fmt.Errorf("exec client: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.Config, http.MethodPost, u)
	if err != nil {
		return nil, fmt.Errorf("exec client: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// Exec runs o.Command in the pod's container until it ends or ctx ends,
// and gives its exit code. err is the failure to run it or to learn how
// it ended (the exit code is then -1).
func (c *Conn) Exec(ctx context.Context, pod, container string, o ExecOptions) (int, error) {
	if o.TTY {
		o.Stderr = nil // a terminal has one output; asking for more fails the exec
	}
	ex, err := c.Executor(pod, container, o)
	if err != nil {
		return -1, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin:             o.Stdin,
		Stdout:            o.Stdout,
		Stderr:            o.Stderr,
		Tty:               o.TTY,
		TerminalSizeQueue: o.Resize,
	})
	return ExitCode(err)
}

// ExitCode is the exit code an exec's error carries: 0 for none, the
// command's code, or -1 and the error when the command's end is unknown.
func ExitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, nil
	}
	var pce *utilexec.CodeExitError
	if errors.As(err, &pce) {
		return pce.Code, nil
	}
	return -1, err
}

// Gone reports why the pod is gone ("" if it is still there and
// running): deleted, being deleted, replaced, stopped. A pod that cannot
// be asked about is not said to be gone.
func (c *Conn) Gone(ctx context.Context, pod string, uid string) string {
	p, err := c.pod(ctx, pod)
	switch {
	case apierrors.IsNotFound(err):
		return "deleted"
	case err != nil:
		return ""
	case uid != "" && string(p.UID) != uid:
		return "deleted and made again"
	case p.DeletionTimestamp != nil:
		return "being deleted"
	case p.Status.Phase != corev1.PodRunning:
		return "no longer running"
	}
	return ""
}

// pod is the pod of that name in the namespace.
func (c *Conn) pod(ctx context.Context, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	if err := c.Core.Get().Namespace(c.Namespace).Resource("pods").Name(name).Do(ctx).Into(p); err != nil {
		return nil, err
	}
	return p, nil
}
