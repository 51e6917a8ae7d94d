//go:build !linux

package confine

import (
	"os"
	"path/filepath"
	"strconv"
)

// Temps are the owners' private temporary folders; without a runner here
// there are none (Options.Tmp stays empty).
type Temps struct{ base string }

// DefaultTempBase is <the host's temporary directory>/dsh-<uid>-tmp.
func DefaultTempBase() string {
	return filepath.Join(os.TempDir(), "dsh-"+strconv.Itoa(os.Getuid())+"-tmp")
}

// OpenTemps makes nothing here.
func OpenTemps(base string) (*Temps, error) {
	if base == "" {
		base = DefaultTempBase()
	}
	return &Temps{base: base}, nil
}

func (t *Temps) Base() string               { return t.base }
func (t *Temps) Dir() string                { return "" }
func (t *Temps) Path(string) string         { return "" }
func (t *Temps) For(string) (string, error) { return "", nil }
func (t *Temps) Release(string) error       { return nil }
func (t *Temps) Close() error               { return nil }

func tmpEnv(string, string) map[string]string { return nil }
