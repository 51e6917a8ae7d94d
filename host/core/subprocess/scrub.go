package subprocess

import (
	"os"
	"strings"
)

// sensitiveWords are the parts of a name that mark a credential, in upper
// case.
var sensitiveWords = []string{"KEY", "PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE"}

// Sensitive reports whether a variable name looks like a credential's: it
// contains KEY, PASSWORD, PASSWD, SECRET, TOKEN, CREDENTIAL or PRIVATE in
// any case. (Not a case-insensitive regexp: this runs for every ambient
// variable, and the regexp cost ~2 µs a name.)
func Sensitive(name string) bool { return containsAny(strings.ToUpper(name), sensitiveWords) }

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// HasURLPassword reports whether value holds a URL with a password,
// scheme://user:password@host (the user may be empty, as in
// redis://:password@host), anywhere in it.
func HasURLPassword(value string) bool {
	for {
		i := strings.Index(value, "://")
		if i < 0 {
			return false
		}
		value = value[i+3:]
		// The authority ends where the path, query or fragment begins.
		auth := value
		if end := strings.IndexAny(auth, "/?# \t\n"); end >= 0 {
			auth = auth[:end]
		}
		// The last @: a password may hold an unescaped one.
		if at := strings.LastIndexByte(auth, '@'); at > 0 {
			if colon := strings.IndexByte(auth[:at], ':'); colon >= 0 && colon < at-1 {
				return true
			}
		}
	}
}

// Scrub decides which of the host's variables never reach a command or a
// plugin: those whose name looks like a credential's (Sensitive, or a
// name containing one of Extra's substrings, in any case) and those whose
// value holds a URL with a password, except the names in Keep (exact).
// The zero Scrub, and a nil one, apply the built-in rules alone.
type Scrub struct {
	extra []string // upper case
	keep  map[string]bool
}

// NewScrub is a Scrub with extra name substrings (case-insensitive) and
// exact names to keep.
func NewScrub(extra, keep []string) *Scrub {
	s := &Scrub{keep: map[string]bool{}}
	for _, e := range extra {
		if e != "" {
			s.extra = append(s.extra, strings.ToUpper(e))
		}
	}
	for _, k := range keep {
		s.keep[k] = true
	}
	return s
}

// Drops reports whether the variable name=value is withheld.
func (s *Scrub) Drops(name, value string) bool {
	if s != nil && s.keep[name] {
		return false
	}
	upper := strings.ToUpper(name)
	if containsAny(upper, sensitiveWords) || (s != nil && containsAny(upper, s.extra)) {
		return true
	}
	return HasURLPassword(value)
}

// Lookup wraps lookup so that withheld variables look unset.
func (s *Scrub) Lookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok || s.Drops(name, v) {
			return "", false
		}
		return v, true
	}
}

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
		if v, ok := lookup(name); ok && !(*Scrub)(nil).Drops(name, v) {
			env = append(env, name+"="+v)
		} else if name == "PATH" {
			env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
		}
	}
	return env
}
