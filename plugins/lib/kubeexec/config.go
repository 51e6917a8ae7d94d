// Package kubeexec owns running a command in a Kubernetes pod's container
// through the pods/exec subresource: the target's config (kubeconfig and
// context or in-cluster, namespace, pod or label selector, container), the
// choice of a running pod, the REST config and the exec client (WebSocket,
// falling back to SPDY as kubectl does), one plain sentence for each API
// server error, the in-pod scripts that run a command and end its whole
// tree, and the relay: the local process an executor starts through
// ctx.subprocess for each command (Relay). Executors and terminal
// backends build on it.
package kubeexec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Target is where commands run: which cluster (a kubeconfig and context,
// or the cluster this process runs in), which pod and which container.
type Target struct {
	// Kubeconfig is the kubeconfig file; "" is the default loading rules
	// (KUBECONFIG, else ~/.kube/config).
	Kubeconfig string `json:"kubeconfig" desc:"kubeconfig file; empty is KUBECONFIG, else ~/.kube/config"`
	// Context is the kubeconfig context; "" is its current context.
	Context string `json:"context" desc:"kubeconfig context; empty is the current context"`
	// InCluster uses the service account of the pod dsh runs in.
	InCluster bool `json:"inCluster" desc:"use the service account of the pod dsh runs in (no kubeconfig)"`
	// Namespace is the pod's namespace; "" is the context's, else default.
	Namespace string `json:"namespace" desc:"the pod's namespace; empty is the context's namespace, else default"`
	// Pod names the pod; LabelSelector picks a running one instead.
	Pod string `json:"pod" desc:"the pod commands run in (or labelSelector)"`
	// LabelSelector picks a running pod among those it matches (the
	// first by name), at each command.
	LabelSelector string `json:"labelSelector" desc:"pick a running pod matching this label selector (or pod)"`
	// Container is the container; "" is the pod's default container (its
	// kubectl.kubernetes.io/default-container annotation, else its first).
	Container string `json:"container" desc:"the container; empty is the pod's default container"`
}

// Check says what is wrong with t, naming the keys.
func (t Target) Check() error {
	switch {
	case t.Pod == "" && t.LabelSelector == "":
		return fmt.Errorf("config: neither pod nor labelSelector is set: name the pod commands run in")
	case t.Pod != "" && t.LabelSelector != "":
		return fmt.Errorf("config: pod %q and labelSelector %q are both set: set one", t.Pod, t.LabelSelector)
	case t.InCluster && (t.Kubeconfig != "" || t.Context != ""):
		return fmt.Errorf("config: inCluster is set with kubeconfig or context: set one way to reach the cluster")
	}
	return nil
}

// Where names the target for messages: "pod default/web" or "a pod of
// default matching app=web".
func (t Target) Where(namespace string) string {
	if t.Pod != "" {
		return "pod " + namespace + "/" + t.Pod
	}
	return "a pod of namespace " + namespace + " matching " + t.LabelSelector
}

// Conn is a target reached: its REST config, a client of the core API
// group and the namespace resolved.
type Conn struct {
	Target    Target
	Namespace string
	Config    *rest.Config
	// Core is a client of the core API group (pods and their exec). It
	// knows only that group's types: client-go's clientset knows every
	// group's, and registering them all would cost each relay a few
	// milliseconds of its start.
	Core rest.Interface
}

// coreScheme knows the core API group's types, and the options pods are
// read and exec'd with.
var coreScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	return s
}()

// coreParams encodes options (ListOptions, PodExecOptions) as a request's
// query.
var coreParams = runtime.NewParameterCodec(coreScheme)

// Connect loads t's REST config and makes a client. Nothing is asked of
// the API server yet.
func Connect(t Target) (*Conn, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	cfg, ns, err := t.restConfig()
	if err != nil {
		return nil, err
	}
	if t.Namespace != "" {
		ns = t.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	cfg.UserAgent = "dsh"
	// client-go's default (5 a second) would make a quick run of commands,
	// one pod lookup each, wait for its own rate limiter.
	cfg.QPS, cfg.Burst = 50, 100
	core := rest.CopyConfig(cfg)
	core.GroupVersion = &corev1.SchemeGroupVersion
	core.APIPath = "/api"
	core.NegotiatedSerializer = serializer.NewCodecFactory(coreScheme).WithoutConversion()
	rc, err := rest.RESTClientFor(core)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Conn{Target: t, Namespace: ns, Config: cfg, Core: rc}, nil
}

// serviceAccountNamespace holds an in-cluster pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func (t Target) restConfig() (*rest.Config, string, error) {
	if t.InCluster {
		cfg, err := rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			cfg, err = serviceDNSConfig()
		}
		if err != nil {
			return nil, "", fmt.Errorf("config: inCluster: %w", err)
		}
		ns, _ := os.ReadFile(serviceAccountNamespace)
		return cfg, strings.TrimSpace(string(ns)), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if t.Kubeconfig != "" {
		rules.ExplicitPath = t.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		where := "the default kubeconfig"
		if t.Kubeconfig != "" {
			where = "kubeconfig " + t.Kubeconfig
		}
		if t.Context != "" {
			where += " (context " + t.Context + ")"
		}
		return nil, "", fmt.Errorf("config: %s: %w", where, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = ""
	}
	return cfg, ns, nil
}

// The service account's files in a pod.
const (
	serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	serviceAccountCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// serviceDNSConfig is the in-cluster config of a process whose
// environment lacks KUBERNETES_SERVICE_HOST (a plugin's environment is
// minimal): the API server by its service name, the service account's
// token and CA.
func serviceDNSConfig() (*rest.Config, error) {
	if _, err := os.Stat(serviceAccountToken); err != nil {
		return nil, rest.ErrNotInCluster
	}
	return &rest.Config{
		Host:            "https://kubernetes.default.svc",
		TLSClientConfig: rest.TLSClientConfig{CAFile: serviceAccountCA},
		BearerTokenFile: serviceAccountToken,
	}, nil
}

// Quiet stops client-go's own log lines: a relay's stderr is the
// command's, and what goes wrong is said once, in a sentence.
// Once: klog's logger may not change while client-go logs.
func Quiet() { quiet.Do(func() { klog.SetLogger(logr.Discard()) }) }

var quiet sync.Once
