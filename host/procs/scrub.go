package procs

import "github.com/dshrun/dsh/host/credential"

// minimalNames are the only host variables a plugin or the watchdog sees:
// enough to find programs, a home and a locale.
var minimalNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
	"TZ", "TMPDIR", "DSH_HOME",
}

// MinimalEnv is the environment of processes the host starts for itself
// (plugins, the watchdog): the few variables of minimalNames that lookup
// has and the built-in scrub lets through, and a PATH in any case.
func MinimalEnv(lookup func(string) (string, bool)) []string {
	var env []string
	for _, name := range minimalNames {
		if v, ok := lookup(name); ok && !(*credential.Rule)(nil).Withholds(name, v) {
			env = append(env, name+"="+v)
		} else if name == "PATH" {
			env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
		}
	}
	return env
}
