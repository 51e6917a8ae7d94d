package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// target is where a session's shell runs: the cluster's address and the
// pod's container, as the relay is handed it.
type target struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	InCluster  bool   `json:"inCluster,omitempty"`
	Namespace  string `json:"namespace"`
	Pod        string `json:"pod"`
	Container  string `json:"container,omitempty"`
}

// The service account's files in a pod, for inCluster.
const (
	saDir     = "/var/run/secrets/kubernetes.io/serviceaccount"
	inCluster = "https://kubernetes.default.svc"
)

// restConfig is the client config for t, and the namespace its context
// names (empty when it names none).
func restConfig(t target) (*rest.Config, string, error) {
	if t.InCluster {
		// Not rest.InClusterConfig: it reads the service's address from
		// the environment, which a plugin's is stripped of; the cluster's
		// own DNS name reaches the same service.
		c := &rest.Config{
			Host:            inCluster,
			BearerTokenFile: saDir + "/token",
			TLSClientConfig: rest.TLSClientConfig{CAFile: saDir + "/ca.crt"},
		}
		ns := ""
		if b, err := os.ReadFile(saDir + "/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
		return c, ns, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: t.Kubeconfig}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
	c, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", t.Kubeconfig, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", t.Kubeconfig, err)
	}
	return c, ns, nil
}

// podInfo is what a pod's JSON says of it here.
type podInfo struct {
	Metadata struct {
		Name              string            `json:"name"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name string `json:"name"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// apiGet reads the core API's path p (under /api/v1) into v; a status the
// API server answers with is an error that says what it said.
func apiGet(ctx context.Context, c *rest.Config, p string, query url.Values, v any) error {
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return err
	}
	base, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return err
	}
	u := *base
	u.Path = path.Join(u.Path, "/api/v1", p)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the cluster at %s cannot be reached: %w", c.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("the cluster at %s: %w", c.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct{ Message string }
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			return &apiError{code: resp.StatusCode, msg: st.Message}
		}
		return &apiError{code: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	return json.Unmarshal(body, v)
}

// apiError is the API server's refusal.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the API server answered %d: %s", e.code, e.msg)
}

// resolve finds the pod and container a session opens in: the pod named,
// or the newest running pod the selector matches; the container named, or
// the pod's default (its kubectl.kubernetes.io/default-container
// annotation, else its first). A pod that is not running is refused.
func resolve(ctx context.Context, c *rest.Config, ns, pod, selector, container string) (podName, containerName string, err error) {
	var p podInfo
	if pod != "" {
		if err := apiGet(ctx, c, path.Join("namespaces", ns, "pods", pod), nil, &p); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.code == http.StatusNotFound {
				return "", "", fmt.Errorf("pod %s/%s does not exist", ns, pod)
			}
			return "", "", fmt.Errorf("pod %s/%s: %w", ns, pod, err)
		}
	} else {
		var list struct{ Items []podInfo }
		if err := apiGet(ctx, c, path.Join("namespaces", ns, "pods"), url.Values{"labelSelector": {selector}}, &list); err != nil {
			return "", "", fmt.Errorf("pods of %s matching %q: %w", ns, selector, err)
		}
		for _, it := range list.Items {
			if it.Status.Phase == "Running" && it.Metadata.DeletionTimestamp == nil {
				p = it
				break
			}
		}
		if p.Metadata.Name == "" {
			return "", "", fmt.Errorf("no running pod in namespace %s matches %q (%d match)", ns, selector, len(list.Items))
		}
	}
	if p.Status.Phase != "" && p.Status.Phase != "Running" {
		return "", "", fmt.Errorf("pod %s/%s is %s, not Running", ns, p.Metadata.Name, p.Status.Phase)
	}
	var names []string
	for _, ct := range p.Spec.Containers {
		names = append(names, ct.Name)
	}
	if container == "" {
		container = p.Metadata.Annotations["kubectl.kubernetes.io/default-container"]
	}
	if container == "" && len(names) > 0 {
		container = names[0]
	}
	if len(names) > 0 && !slices.Contains(names, container) {
		return "", "", fmt.Errorf("pod %s/%s has no container %q (it has %s)", ns, p.Metadata.Name, container, strings.Join(names, ", "))
	}
	return p.Metadata.Name, container, nil
}

// executor opens a TTY exec of command in t's container: over WebSocket,
// or SPDY where the API server cannot upgrade to it (as kubectl does).
func executor(c *rest.Config, t target, command []string) (remotecommand.Executor, error) {
	base, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return nil, err
	}
	u := *base
	u.Path = path.Join(u.Path, "/api/v1/namespaces", t.Namespace, "pods", t.Pod, "exec")
	q := url.Values{"stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}, "command": command}
	if t.Container != "" {
		q.Set("container", t.Container)
	}
	u.RawQuery = q.Encode()
	ws, err := remotecommand.NewWebSocketExecutor(c, http.MethodGet, u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c, http.MethodPost, &u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}
