package kubeexec

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sentence is an error whose text is one plain sentence a model reads as
// it is.
type Sentence struct{ Text string }

func (s *Sentence) Error() string { return s.Text }

func sentence(format string, a ...any) error { return &Sentence{Text: fmt.Sprintf(format, a...)} }

// Explain turns err, from the API server or the way to it, about pod
// (""/container when not known yet), into one plain sentence: forbidden,
// unauthorized, no such pod, no such container, no shell in it, connection
// refused, or the connection lost. A Sentence comes back as it is.
func (c *Conn) Explain(err error, pod, container string) error {
	if err == nil {
		return nil
	}
	var s *Sentence
	if errors.As(err, &s) {
		return s
	}
	where := c.Target.Where(c.Namespace)
	if pod != "" {
		where = "pod " + c.Namespace + "/" + pod
	}
	server := c.Config.Host
	msg := err.Error()
	// The SPDY client gives an API server's refusal of the upgrade as text
	// ("unable to upgrade connection: <the Status message>"), not as a
	// Status: the text tells the same cases apart.
	upgrade, refused := strings.CutPrefix(msg, "unable to upgrade connection: ")
	has := func(s string) bool { return refused && strings.Contains(upgrade, s) }
	switch {
	case (apierrors.IsForbidden(err) || has(" is forbidden")) && strings.Contains(msg, "pods/exec"):
		return sentence("Kubernetes does not allow this account to run commands in %s: it needs permission to create pods/exec in namespace %s.", where, c.Namespace)
	case apierrors.IsForbidden(err) || has(" is forbidden"):
		return sentence("Kubernetes does not allow this account to read pods in namespace %s: it needs permission to get and list pods there.", c.Namespace)
	case apierrors.IsUnauthorized(err) || has("Unauthorized"):
		return sentence("The Kubernetes API server at %s did not accept this account's credentials.", server)
	case has("is not valid for pod") || (apierrors.IsBadRequest(err) && strings.Contains(msg, "container")):
		return sentence("The %s has no container %s, or it is not running.", where, container)
	case (apierrors.IsNotFound(err) || has(" not found")) && pod != "":
		return sentence("There is no pod %s in namespace %s.", pod, c.Namespace)
	case apierrors.IsNotFound(err):
		return sentence("The namespace %s or its pods cannot be found.", c.Namespace)
	case errors.Is(err, syscall.ECONNREFUSED):
		return sentence("The Kubernetes API server at %s refuses connections: the cluster may be down.", server)
	case refused:
		return sentence("Kubernetes refused the command in %s: %s.", where, plain(upgrade))
	}
	if m := notFound.FindStringSubmatch(msg); m != nil {
		in := where
		if container != "" {
			in = "container " + container + " of " + where
		}
		return sentence("The %s has no %s on its PATH, and commands there run through %s (an image without a shell cannot run them).", in, m[1], m[1])
	}
	var dns *net.DNSError
	var ue *url.Error
	if errors.As(err, &dns) || (errors.As(err, &ue) && ue.Timeout()) {
		return sentence("The Kubernetes API server at %s cannot be reached.", server)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		m := strings.TrimSpace(st.Status().Message)
		if m != "" {
			return sentence("Kubernetes refused the command in %s: %s.", where, plain(m))
		}
	}
	return sentence("The connection to %s was lost before the command's end was known.", where)
}

// notFound is how a runtime (containerd, CRI-O, the test server) says the
// exec's program is not in the container.
var notFound = regexp.MustCompile(`exec: "([^"]+)": executable file not found in \$PATH`)

// transportWords is how a kubelet's or runtime's error names its call
// ("rpc error: code = InvalidArgument desc = ..."): nothing the reader
// needs.
var transportWords = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// plain is a server's message as the end of a sentence.
func plain(m string) string {
	return strings.TrimSuffix(strings.TrimSpace(transportWords.ReplaceAllString(m, "")), ".")
}
