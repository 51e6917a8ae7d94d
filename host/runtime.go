package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/sdk"
)

// runtimeDir is the host's private directory: plugin sockets and each
// plugin's runtime directory live under it. Directories of hosts that died
// without cleaning up are swept when the next host starts.
type runtimeDir struct {
	base string // shared by every host of this user
	dir  string // this host's: <base>/host-<pid>
}

// hostStartFile, in a host's runtime directory, holds when its host started
// (processStart), where that can be read: with the pid in the directory's
// name it tells a later host that the owner is dead even once its pid was
// given again.
const hostStartFile = "start"

// ownerAlive reports whether the host that made the runtime directory
// dir, named host-<pid>, still runs.
func ownerAlive(dir string, pid int) bool {
	if !processAlive(pid) {
		return false
	}
	was, err := os.ReadFile(filepath.Join(dir, hostStartFile))
	if err != nil || len(was) == 0 {
		return true // no start to compare: the pid alone says
	}
	return processStart(pid) == string(was)
}

// defaultRuntimeBase is $XDG_RUNTIME_DIR/dsh, else <tmp>/dsh-<uid>.
func defaultRuntimeBase() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "dsh")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-%d", os.Getuid()))
}

func newRuntimeDir(base string) (*runtimeDir, error) {
	if base == "" {
		base = defaultRuntimeBase()
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	// A shared /tmp lets others pre-create the directory: refuse one that is
	// a symlink or not ours.
	fi, err := os.Lstat(base)
	if err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	uid, ok := fileOwner(fi)
	if !fi.IsDir() || (ok && uid != os.Getuid()) {
		return nil, fmt.Errorf("runtime directory %s: not a directory owned by uid %d", base, os.Getuid())
	}
	if err := os.Chmod(base, 0o700); err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	sweepRuntime(base)
	sweepTmpSockets(os.TempDir())
	dir := filepath.Join(base, "host-"+strconv.Itoa(os.Getpid()))
	_ = os.RemoveAll(dir) // a previous host with our pid is certainly dead
	for _, d := range []string{dir, filepath.Join(dir, "sockets"), filepath.Join(dir, "plugins")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("runtime directory: %w", err)
		}
	}
	if start := processStart(os.Getpid()); start != "" {
		if err := os.WriteFile(filepath.Join(dir, hostStartFile), []byte(start), 0o600); err != nil {
			return nil, fmt.Errorf("runtime directory: %w", err)
		}
	}
	return &runtimeDir{base: base, dir: dir}, nil
}

// sweepRuntime removes the directories of hosts that are no longer alive.
func sweepRuntime(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "host-"))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "host-") || err != nil || pid == os.Getpid() {
			continue
		}
		if dir := filepath.Join(base, e.Name()); !ownerAlive(dir, pid) {
			_ = os.RemoveAll(dir)
		}
	}
}

func (r *runtimeDir) sockets() string { return filepath.Join(r.dir, "sockets") }

// pluginDir makes (if needed) and returns the private directory of one entry.
func (r *runtimeDir) pluginDir(id string) (string, error) {
	d := filepath.Join(r.dir, "plugins", id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	return d, nil
}

func (r *runtimeDir) remove() error { return os.RemoveAll(r.dir) }

// PluginEnv builds the minimal, scrubbed environment of the plugin with
// entry id id: PATH, HOME, USER, the locale, TMPDIR and DSH_HOME when
// lookup has them (nothing else of the host's, API keys above all), and who
// its host and its entry are.
func PluginEnv(lookup func(string) (string, bool), id string) []string {
	env := append(procs.MinimalEnv(lookup),
		"DSH_HOST_PID="+strconv.Itoa(os.Getpid()),
		"DSH_PLUGIN_ID="+id,
	)
	if dir, ok := lookup(sdk.EnvCPUProfile); ok && dir != "" {
		env = append(env, sdk.EnvCPUProfile+"="+dir) // a diagnostic the user asked for
	}
	return env
}
