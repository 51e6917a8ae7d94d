//go:build unix

package pluginproc

import (
	"os"
	"os/exec"
	"strconv"

	"github.com/dshrun/dsh/sdk"
)

// handOver gives the plugin data on an inherited pipe named by
// sdk.EnvTLSFD. The data (about 2 KiB) is written whole before the start,
// well within any pipe's buffer, so nothing waits on the plugin reading it.
// The returned func closes the host's copy once the plugin has started.
func handOver(cmd *exec.Cmd, data []byte) (func(), error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	fd := 2 + len(cmd.ExtraFiles) // ExtraFiles start at descriptor 3
	cmd.Env = append(cmd.Env, sdk.EnvTLSFD+"="+strconv.Itoa(fd))
	return func() { r.Close() }, nil
}
