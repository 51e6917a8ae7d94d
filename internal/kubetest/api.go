//go:build linux

package kubetest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var podsResource = schema.GroupResource{Resource: "pods"}

// routes serves the API server's paths: pods get and list, and pods/exec.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", s.listPods)
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{name}", s.getPod)
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{name}/exec", s.exec)
	mux.HandleFunc("GET /api", s.discovery)
	mux.HandleFunc("GET /api/v1", s.discovery)
	mux.HandleFunc("GET /apis", s.discovery)
	mux.HandleFunc("GET /version", s.discovery)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for s.hang.Load() {
			// A stopped server: the request waits, its client gives up.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// discovery answers the paths kubectl reads before it does anything: the
// core group offers pods (get, list) and pods/exec, and no other group exists.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api":
		writeJSON(w, metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: strings.TrimPrefix(s.URL, "https://")},
			},
		})
	case "/api/v1":
		writeJSON(w, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "list"}, ShortNames: []string{"po"}},
				{Name: "pods/exec", Namespaced: true, Kind: "PodExecOptions", Verbs: []string{"create", "get"}},
			},
		})
	case "/apis":
		writeJSON(w, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}})
	case "/version":
		writeJSON(w, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-kubetest", Platform: "linux/amd64"})
	}
}

// writeStatus answers with err's Kubernetes Status body and code.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// forbiddenErr is the error RBAC gives user for verb on resource.
func (s *Server) forbiddenErr(verb, resource, name, ns string) *apierrors.StatusError {
	return apierrors.NewForbidden(podsResource, name, fmt.Errorf(
		"User %q cannot %s resource %q in API group \"\" in the namespace %q", User, verb, resource, ns))
}

func (s *Server) getPod(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if s.isForbidden("pods") {
		writeStatus(w, s.forbiddenErr("get", "pods", name, ns))
		return
	}
	p := s.podIn(ns, name)
	if p == nil {
		writeStatus(w, apierrors.NewNotFound(podsResource, name))
		return
	}
	if wantsTable(r) {
		writeJSON(w, s.podTable([]*pod{p}))
		return
	}
	writeJSON(w, s.podObject(p))
}

// wantsTable reports whether the client (kubectl get) asks for rows to print.
func wantsTable(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "as=Table")
}

// podTable is pods as kubectl get prints them.
func (s *Server) podTable(pods []*pod) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name"},
			{Name: "Ready", Type: "string"},
			{Name: "Status", Type: "string"},
			{Name: "Restarts", Type: "integer"},
			{Name: "Age", Type: "string"},
		},
		Rows: []metav1.TableRow{},
	}
	for _, p := range pods {
		age := duration.HumanDuration(time.Since(p.created))
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{p.name, fmt.Sprintf("%d/%d", len(p.containers), len(p.containers)), "Running", 0, age},
			Object: runtime.RawExtension{Object: s.podObject(p)},
		})
	}
	return t
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if s.isForbidden("pods") {
		writeStatus(w, s.forbiddenErr("list", "pods", "", ns))
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err)))
		return
	}
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	if ns == s.Namespace {
		for _, p := range s.list() {
			if sel.Matches(labels.Set(p.labels)) {
				list.Items = append(list.Items, *s.podObject(p))
			}
		}
	}
	if list.Items == nil {
		list.Items = []corev1.Pod{}
	}
	if wantsTable(r) {
		var pods []*pod
		for _, item := range list.Items {
			if p := s.lookup(item.Name); p != nil {
				pods = append(pods, p)
			}
		}
		writeJSON(w, s.podTable(pods))
		return
	}
	writeJSON(w, list)
}

// podIn returns pod name if ns is the server's namespace.
func (s *Server) podIn(ns, name string) *pod {
	if ns != s.Namespace {
		return nil
	}
	return s.lookup(name)
}

// podObject is p as the API shows it: running, every container ready.
func (s *Server) podObject(p *pod) *corev1.Pod {
	created := metav1.NewTime(p.created)
	obj := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: s.Namespace, UID: types.UID(p.uid),
			Labels: p.labels, CreationTimestamp: created, ResourceVersion: "1",
		},
		Spec: corev1.PodSpec{NodeName: "kubetest"},
		Status: corev1.PodStatus{
			Phase:     corev1.PodRunning,
			HostIP:    "127.0.0.1",
			PodIP:     "127.0.0.1",
			StartTime: &created,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
		},
	}
	for _, c := range p.containers {
		obj.Spec.Containers = append(obj.Spec.Containers, corev1.Container{Name: c, Image: "kubetest/host"})
		obj.Status.ContainerStatuses = append(obj.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, Ready: true, Image: "kubetest/host", ContainerID: "kubetest://" + p.name + "/" + c,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}},
		})
	}
	return obj
}

// exec checks the request as the API server does (authorization, pod,
// container) and proxies it to the streaming server's one-time exec URL.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/exec"}, r.Method))
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if s.isForbidden("pods/exec") {
		writeStatus(w, s.forbiddenErr("create", "pods/exec", name, ns))
		return
	}
	p := s.podIn(ns, name)
	if p == nil {
		writeStatus(w, apierrors.NewNotFound(podsResource, name))
		return
	}
	q := r.URL.Query()
	container := q.Get("container")
	if container == "" {
		if len(p.containers) != 1 {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf(
				"a container name must be specified for pod %s, choose one of: %v", name, p.containers)))
			return
		}
		container = p.containers[0]
	}
	if !p.hasContainer(container) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %q is not valid for pod %q", container, name)))
		return
	}
	req := &runtimeapi.ExecRequest{
		ContainerId: p.name + "/" + container,
		Cmd:         q["command"],
		Tty:         flag(q, "tty"),
		Stdin:       flag(q, "stdin"),
		Stdout:      flag(q, "stdout"),
		Stderr:      flag(q, "stderr"),
	}
	if len(req.Cmd) == 0 {
		writeStatus(w, apierrors.NewBadRequest("you must specify at least one command for the container"))
		return
	}
	if req.Tty {
		req.Stderr = false // a terminal merges stderr into stdout
	}
	resp, err := s.stream.GetExec(req)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	target, err := url.Parse(resp.Url)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}

	// The exec on the streaming server lives as long as this request: when
	// the client goes away, the command is ended too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	token := tokenOf(target)
	s.calls.put(token, ctx)
	defer s.calls.take(token)

	if wantsTranslation(r) {
		s.translate(ctx, w, r, target, req)
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("pod %q: reach the node's streaming server: %w", name, err)))
		},
	}
	proxy.ServeHTTP(w, r)
}

func flag(q url.Values, key string) bool {
	v := q.Get(key)
	return v == "true" || v == "1"
}

// tokenOf is the last path element of a streaming URL: its one-time token.
func tokenOf(u *url.URL) string {
	i := strings.LastIndex(u.Path, "/")
	return u.Path[i+1:]
}

// calls maps a streaming token to the context of the API request that made
// it, so the streaming server can run the command under that lifetime.
type calls struct {
	mu sync.Mutex
	m  map[string]context.Context
}

func (c *calls) put(token string, ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]context.Context{}
	}
	c.m[token] = ctx
}

func (c *calls) take(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, token)
}

func (c *calls) get(token string) (context.Context, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, ok := c.m[token]
	return ctx, ok
}

// streamHandler serves the streaming server with each exec's request
// context tied to the API request that asked for it. A hijacked connection's
// context is not cancelled when the peer goes away, so this is what ends a
// command whose client is gone.
func (s *Server) streamHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, ok := s.calls.get(tokenOf(r.URL))
		if !ok {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, "exec"))
			return
		}
		callCtx := ctx
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(callCtx, cancel)
		defer stop()
		s.stream.ServeHTTP(w, r.WithContext(ctx))
	})
}
