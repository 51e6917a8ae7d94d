package sdk_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/sdk"
)

// A plugin exits when its host dies, even when no parent-death signal
// reaches it (here its "host" is an unrelated process).
func TestPluginExitsWhenHostDies(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dsh-noop")
	build := exec.Command("go", "build", "-o", bin, "./internal/testplugins/noop")
	build.Dir = testplugins.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	host := exec.Command("sleep", "60")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	plugin := exec.Command(bin)
	plugin.Env = []string{
		sdk.Handshake.MagicCookieKey + "=" + sdk.Handshake.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1",
		sdk.EnvHostPID + "=" + strconv.Itoa(host.Process.Pid),
	}
	out, err := plugin.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := plugin.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "1|1|") {
		t.Fatalf("handshake line %q: %v", line, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- plugin.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("plugin exited while its host lives: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = host.Process.Kill()
	_ = host.Wait()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = plugin.Process.Kill()
		t.Fatal("plugin outlived its host by 5s")
	}
	_ = os.Remove(bin)
}
