package credential

import "testing"

// The names both ways: what the rule withholds and what commands rely on.
func TestName(t *testing.T) {
	for name, want := range map[string]bool{
		// The seed's words, anywhere in a name.
		"MY_API_KEY": true, "db_password": true, "GH_TOKEN": true, "Client_Secret": true,
		"KEYCHAIN": true, "apikey": true, "tokens": true, "PASSWORD": true, "apiKey": true,
		"MY_PASSWD": true, "AWS_CREDENTIALS": true, "gcp_credential_file": true, "SSH_PRIVATE": true, "private_pem": true,
		"PASSWDX": true,
		// Segments.
		"GH_PAT": true, "GITHUB_PAT": true, "MYSQL_PWD": true, "DB_PASS": true, "CI_JOB_JWT": true,
		"GIT_CREDS": true, "NETLIFY_AUTH": true, "SENTRY_DSN": true, "SESSION_COOKIE": true,
		"PAT": true, "AUTH": true, "JWT": true, "dsn": true, "pass": true, "auth-header": true, "db.pass": true,
		"PAT_FILE": true, "X_CREDS_Y": true, "gh_pat": true,
		// Names commands rely on.
		"PWD": false, "pwd": false, "OLDPWD": false, "GIT_AUTHOR_NAME": false, "GIT_AUTHOR_EMAIL": false,
		"COMPASS_HOME": false, "BYPASS_CACHE": false, "PATH": false, "HOME": false, "LANG": false,
		"PATTERN": false, "AUTHOR": false, "PASSAGE": false, "DSNX": false, "COOKIES_DIR": false,
		"KE": false, "TOKE": false, "SECRE": false, "PASSWOR": false, "": false, "_": false,
		"CREDENTIA": false, "PRIVAT": false, "DATABASE_URL": false,
		"K\u212aY": false, // KELVIN SIGN folds to k in Unicode, not in ASCII names
	} {
		if got := Name(name); got != want {
			t.Errorf("Name(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValue(t *testing.T) {
	for v, want := range map[string]bool{
		"postgres://user:password@db:5432/app":                       true,
		"redis://:secret@cache:6379":                                 true,
		"mysql://u:p@ss@h/db":                                        true,
		"a list: http://x,https://u:p@h/":                            true,
		"http://u:p@h https://other":                                 true,
		"https://user@example.com":                                   true, // a user alone is user-info
		"https://user:@example.com":                                  true,
		"https://0123abcd@o0.ingest.sentry.io/42":                    true,
		"https://hooks.slack.com/services/T000/B000/XXXX":            true,
		"see HTTPS://HOOKS.SLACK.COM/services/T0/B0/X":               true,
		"https://discord.com/api/webhooks/1/abc":                     true,
		"https://acme.webhook.office.com/webhookb2/x":                true,
		"https://example.com/a@b:c":                                  false,
		"https://example.com:8080/path":                              false,
		"https://hooks.slack.com/":                                   false,
		"https://hooks.slack.com/services/":                          false,
		"https://example.com/?next=https://hooks.slack.com/services": false,
		"ftp://hooks.slack.com/services/T/B/X":                       false,
		"git@github.com:org/repo.git":                                false,
		"/usr/bin:/bin":                                              false,
		"":                                                           false,
		"://":                                                        false,
	} {
		if got := Value(v); got != want {
			t.Errorf("Value(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestRule(t *testing.T) {
	r := NewRule([]string{"vault", ""}, []string{"GPG_KEY_ID", "MIRROR"})
	for _, c := range []struct {
		name, value string
		want        bool
	}{
		{"GPG_KEY_ID", "ABC", false},
		{"MIRROR", "https://u:p@mirror", false}, // kept by name, whatever the value
		{"Vault_Addr", "x", true},
		{"GH_PAT", "x", true},
		{"PLAIN", "https://hooks.slack.com/services/T/B/X", true},
		{"PLAIN", "ok", false},
		{"PWD", "/work", false},
	} {
		if got := r.Withholds(c.name, c.value); got != c.want {
			t.Errorf("Withholds(%q, %q) = %v, want %v", c.name, c.value, got, c.want)
		}
	}
	var none *Rule
	if !none.Withholds("GH_PAT", "x") || none.Withholds("Vault_Addr", "x") || none.SecretName("PWD") {
		t.Error("the nil rule is not the built-in one")
	}
	look := r.Lookup(func(k string) (string, bool) { return "v", k != "UNSET" })
	if _, ok := look("GH_PAT"); ok {
		t.Error("Lookup shows GH_PAT")
	}
	if v, ok := look("GIT_AUTHOR_NAME"); !ok || v != "v" {
		t.Errorf("Lookup(GIT_AUTHOR_NAME) = %q, %v", v, ok)
	}
}
