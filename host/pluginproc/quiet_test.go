package pluginproc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// A plugin the host stopped is not an error in the log; a plugin that died
// is.
func TestQuietStops(t *testing.T) {
	var buf bytes.Buffer
	l := quietStops{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})}.Named("p")
	l.Error("plugin process exited", "plugin", "/bin/x", "id", 1, "error", "context canceled")
	if buf.Len() != 0 {
		t.Fatalf("a stop the host made was logged: %s", buf.String())
	}
	l.Error("plugin process exited", "plugin", "/bin/x", "id", 1, "error", "signal: killed")
	if !strings.Contains(buf.String(), "[ERROR] p: plugin process exited") {
		t.Fatalf("a plugin that died: %q", buf.String())
	}
}
