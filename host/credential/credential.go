// Package credential owns the one rule that tells a credential from the
// rest: which of the host's environment variables the subprocess service
// withholds from commands and plugins, and which values `dsh config`
// masks. Both read the rule here, so what a command cannot see and what
// the printed composition hides never disagree.
package credential

import (
	"os"
	"strings"
)

// nameWords mark a credential anywhere in a name, in upper case: the
// seed's KEY, PASSWORD, SECRET and TOKEN, and PASSWD, CREDENTIAL and
// PRIVATE.
var nameWords = []string{"KEY", "PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE"}

// nameSegments mark a credential only as a whole segment of a name split
// at '_' (or '-' and '.', for configuration keys): GH_PAT and MYSQL_PWD are
// credentials, GIT_AUTHOR_NAME, COMPASS_HOME and BYPASS_CACHE are not.
var nameSegments = map[string]bool{
	"PAT": true, "PWD": true, "PASS": true, "PASSWD": true, "JWT": true, "AUTH": true,
	"CREDS": true, "CREDENTIAL": true, "CREDENTIALS": true, "DSN": true, "COOKIE": true,
}

// shellNames look like credentials by the segment rule but are the
// shell's own: PWD is the working directory.
var shellNames = map[string]bool{"PWD": true}

// Name reports whether a variable name or configuration key looks like a
// credential's: it contains KEY, PASSWORD, PASSWD, SECRET, TOKEN,
// CREDENTIAL or PRIVATE, or one of its segments is PAT, PWD, PASS, PASSWD,
// JWT, AUTH, CREDS, CREDENTIAL(S), DSN or COOKIE, in any case; PWD itself
// is the shell's. (Not a case-insensitive regexp: this runs for every
// ambient variable, and the regexp cost ~2 µs a name.)
func Name(name string) bool {
	upper := strings.ToUpper(name)
	if containsAny(upper, nameWords) {
		return true
	}
	if shellNames[upper] {
		return false
	}
	for rest := upper; rest != ""; {
		seg := rest
		if i := strings.IndexAny(rest, "_-."); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if nameSegments[seg] {
			return true
		}
	}
	return false
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// Value reports whether a value holds a credential whatever its name: a
// URL with user-info (HasURLUserInfo) or a well-known webhook URL, whose
// path is its secret (HasWebhookURL).
func Value(value string) bool { return HasURLUserInfo(value) || HasWebhookURL(value) }

// HasURLUserInfo reports whether value holds, anywhere in it, a URL with
// user-info: scheme://user@host, scheme://user:password@host or
// scheme://:password@host. A user alone counts: it is often the token
// itself (https://TOKEN@github.com, a Sentry DSN's key).
func HasURLUserInfo(value string) bool {
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
		// Anything before an @ of the authority is user-info (the last @:
		// a password may hold an unescaped one).
		if at := strings.LastIndexByte(auth, '@'); at > 0 {
			return true
		}
	}
}

// webhookPrefixes are URLs, without the scheme, whose rest is a secret
// that lets anyone post: Slack, Discord and Microsoft Teams incoming
// webhooks. Matched on the value because such a URL is kept under any
// name (SLACK_URL, NOTIFY, …).
var webhookPrefixes = []string{
	"hooks.slack.com/services/",
	"hooks.slack.com/workflows/",
	"hooks.slack.com/triggers/",
	"discord.com/api/webhooks/",
	"discordapp.com/api/webhooks/",
	"outlook.office.com/webhook/",
}

// webhookHostSuffixes are hosts, under which any path is a webhook's
// secret: Microsoft Teams' per-tenant webhook hosts.
var webhookHostSuffixes = []string{".webhook.office.com"}

// HasWebhookURL reports whether value holds, anywhere in it, an http(s) URL
// of a well-known incoming webhook (webhookPrefixes, webhookHostSuffixes)
// with something after the host's fixed part.
func HasWebhookURL(value string) bool {
	lower := strings.ToLower(value)
	for {
		i := strings.Index(lower, "://")
		if i < 0 {
			return false
		}
		scheme := trailingScheme(lower[:i])
		lower = lower[i+3:]
		if scheme != "https" && scheme != "http" {
			continue
		}
		for _, p := range webhookPrefixes {
			if strings.HasPrefix(lower, p) && len(lower) > len(p) && !strings.ContainsAny(lower[len(p):len(p)+1], " \t\n") {
				return true
			}
		}
		host := lower
		if end := strings.IndexAny(host, "/?# \t\n"); end >= 0 {
			host = host[:end]
		}
		for _, s := range webhookHostSuffixes {
			if strings.HasSuffix(host, s) && len(lower) > len(host)+1 {
				return true
			}
		}
	}
}

// trailingScheme is the URL scheme that s ends with: its last run of
// letters, digits, '+', '-' and '.'.
func trailingScheme(s string) string {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			break
		}
		i--
	}
	return s[i:]
}

// Rule is the built-in rule with a composition's additions (host.scrub):
// more name substrings that mark a credential, and exact names that never
// do. The zero Rule, and a nil one, are the built-in rule alone.
type Rule struct {
	extra []string // upper case
	keep  map[string]bool
}

// NewRule is the built-in rule with extra name substrings
// (case-insensitive) and exact names to keep.
func NewRule(extra, keep []string) *Rule {
	r := &Rule{keep: map[string]bool{}}
	for _, e := range extra {
		if e != "" {
			r.extra = append(r.extra, strings.ToUpper(e))
		}
	}
	for _, k := range keep {
		r.keep[k] = true
	}
	return r
}

// SecretName reports whether a name marks a credential under the rule:
// Name or one of the extra substrings, unless the name is kept.
func (r *Rule) SecretName(name string) bool {
	if r != nil && r.keep[name] {
		return false
	}
	return Name(name) || (r != nil && containsAny(strings.ToUpper(name), r.extra))
}

// Withholds reports whether the variable name=value is a credential under
// the rule: by its name (SecretName) or by its value (Value), unless the
// name is kept.
func (r *Rule) Withholds(name, value string) bool {
	if r != nil && r.keep[name] {
		return false
	}
	return r.SecretName(name) || Value(value)
}

// Lookup wraps lookup (os.LookupEnv when nil) so that withheld variables
// look unset.
func (r *Rule) Lookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok || r.Withholds(name, v) {
			return "", false
		}
		return v, true
	}
}
