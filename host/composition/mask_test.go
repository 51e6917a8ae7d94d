package composition

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const maskedYAML = `
host:
  stopTimeout: 2s
settings:
  llm:
    apiKey: sk-literal
    endpoint: ${ENDPOINT}
    auth: &tok ${LLM_TOKEN}
    model: gpt-${MODEL_SECRET_SUFFIX:-4}
  tokens: {a: 1}
plugins:
  - id: a
    name: a
    config:
      password: hunter2
      nested:
        secretThing: x
        list: ["${DB_PASSWORD}", plain, "${HOME_DIR}"]
      header: Bearer ${API_TOKEN}
      escaped: $${API_TOKEN}
      note: ${NOTE}
      count: 3
      maxTokens: 100
      again: *tok
  - id: b
    path: ${TOOL_KEY_PATH}
    disabled: true
`

func TestMasked(t *testing.T) {
	vars := map[string]string{
		"ENDPOINT":      "https://llm.example",
		"LLM_TOKEN":     "tok-123",
		"DB_PASSWORD":   "pw",
		"HOME_DIR":      "/home/u",
		"API_TOKEN":     "at-1",
		"NOTE":          "hello",
		"TOOL_KEY_PATH": "/secret/place/dsh-b",
	}
	c := mustParse(t, maskedYAML, vars)
	got := c.Masked()
	want := map[string]any{
		"host": map[string]any{"startTimeout": "10s", "stopTimeout": "2s"},
		"settings": map[string]any{
			"llm": map[string]any{
				"apiKey":   masked, // by key
				"endpoint": "https://llm.example",
				"auth":     masked, // from LLM_TOKEN
				"model":    masked, // from MODEL_SECRET_SUFFIX, even by default
			},
			"tokens": masked,
		},
		"plugins": []any{
			map[string]any{
				"id": "a", "name": "a", "disabled": false,
				"config": map[string]any{
					"password": masked,
					"nested": map[string]any{
						"secretThing": masked,
						"list":        []any{masked, "plain", "/home/u"},
					},
					"header":    masked,
					"escaped":   "${API_TOKEN}",
					"note":      "hello",
					"count":     3,
					"maxTokens": masked,
					"again":     masked, // an alias of the LLM_TOKEN value
				},
			},
			map[string]any{"id": "b", "path": masked, "disabled": true},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Masked() =\n%#v\nwant\n%#v", got, want)
	}

	// The composition itself keeps its values.
	if c.Settings["llm"]["auth"] != "tok-123" || c.Plugins[0].Config["password"] != "hunter2" || c.Plugins[1].Path != "/secret/place/dsh-b" {
		t.Errorf("Masked changed the composition: %+v", c)
	}

	// It prints.
	out, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"tok-123", "hunter2", "sk-literal", "pw", "at-1", "/secret/place"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("printed output shows %q:\n%s", secret, out)
		}
	}
}

// Merged keys keep their masking.
func TestMaskedThroughMerge(t *testing.T) {
	c := mustParse(t, `
settings:
  base: &base {auth: "${SERVICE_SECRET}", url: "${URL}"}
plugins:
  - name: a
    config:
      <<: *base
      extra: 1
`, map[string]string{"SERVICE_SECRET": "s", "URL": "u"})
	cfg := c.Masked()["plugins"].([]any)[0].(map[string]any)["config"]
	if want := map[string]any{"auth": masked, "url": "u", "extra": 1}; !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %#v, want %#v", cfg, want)
	}
}

// The names the credential scrub withholds are masked too, and so is any
// value that is a URL carrying its password.
func TestMaskedLikeTheScrub(t *testing.T) {
	c := mustParse(t, `
settings:
  db:
    dsn: postgres://app:hunter2@db/app
    url: https://db.example/app
    adminPasswd: pw1
    awsCredentials: pw2
    privateKeyFile: pw3
plugins:
  - name: a
`, nil)
	got := c.Masked()["settings"].(map[string]any)["db"]
	want := map[string]any{"dsn": masked, "url": "https://db.example/app", "adminPasswd": masked, "awsCredentials": masked, "privateKeyFile": masked}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("db = %#v, want %#v", got, want)
	}
}

// Every name and value the credential scrub withholds is masked, by the
// same rule with the same additions: a GH_PAT interpolated anywhere, keys
// named by a segment, webhook URLs and URLs with user-info; names commands
// rely on, and a name host.scrub keeps, are printed.
func TestMaskedByTheScrubRule(t *testing.T) {
	vars := map[string]string{
		"GH_PAT": "ghp_0123", "MYSQL_PWD": "my-pw", "CI_JOB_JWT": "eyJ.x.y", "NETLIFY_AUTH": "nfp_1",
		"SENTRY_DSN": "https://k3y@o0.ingest.sentry.io/1", "NOTIFY": "https://hooks.slack.com/services/T000/B000/XXXX",
		"GIT_AUTHOR_NAME": "A U Thor", "COMPASS_HOME": "/compass", "VAULT_ADDR": "https://vault:8200", "GPG_KEY_ID": "ABCD",
	}
	c := mustParse(t, `
host:
  scrub: {extra: [vault], keep: [GPG_KEY_ID]}
settings:
  gh: {header: "Bearer ${GH_PAT}", user: "${GIT_AUTHOR_NAME}", home: "${COMPASS_HOME}"}
  db: {args: ["-p${MYSQL_PWD}", plain], pass: literal, bypass_cache: true}
  ci: {jwt: x, token_file: "${CI_JOB_JWT}", deploy: "${NETLIFY_AUTH}"}
  notify: {sentry: "${SENTRY_DSN}", slack: "${NOTIFY}"}
  vault: {addr: "${VAULT_ADDR}", key: "${GPG_KEY_ID}", id: "${GPG_KEY_ID}"}
plugins:
  - name: a
`, vars)
	got := c.Masked()["settings"]
	want := map[string]any{
		"gh":     map[string]any{"header": masked, "user": "A U Thor", "home": "/compass"},
		"db":     map[string]any{"args": []any{masked, "plain"}, "pass": masked, "bypass_cache": true},
		"ci":     map[string]any{"jwt": masked, "token_file": masked, "deploy": masked},
		"notify": map[string]any{"sentry": masked, "slack": masked},
		"vault":  masked, // host.scrub.extra names it
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings = %#v, want %#v", got, want)
	}
	c = mustParse(t, "settings:\n  gpg: {id: \"${GPG_KEY_ID}\"}\nhost:\n  scrub: {keep: [GPG_KEY_ID]}\nplugins:\n  - name: a\n", vars)
	if got := c.Masked()["settings"].(map[string]any)["gpg"]; !reflect.DeepEqual(got, map[string]any{"id": "ABCD"}) {
		t.Errorf("a kept name is masked: %#v", got)
	}
}
