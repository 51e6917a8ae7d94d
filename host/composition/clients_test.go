package composition

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const ciTok = "0123456789abcdef0123456789abcdef0123456789abcdef"

// The clients section: absent is nil (owners end with their connection),
// resumable owners wait 10m unless told, and tokens keep their order.
func TestClientsDefaults(t *testing.T) {
	c := mustParse(t, "plugins: []\n", nil)
	if c.Clients != nil || c.Clients.Resumable() || c.Clients.String() != OwnersConnection {
		t.Errorf("no clients section: %+v", c.Clients)
	}
	c = mustParse(t, "clients: {}\nplugins: []\n", nil)
	if cl := c.Clients; cl == nil || cl.Owners != OwnersConnection || cl.ReleaseGrace != 0 || cl.ResumeWithin != 0 || cl.Tokens != nil || cl.Resumable() {
		t.Errorf("empty clients section: %+v", cl)
	}
	c = mustParse(t, "clients:\n  owners: resumable\nplugins: []\n", nil)
	if cl := c.Clients; cl == nil || !cl.Resumable() || cl.ResumeWithin != 10*time.Minute || cl.ReleaseGrace != 0 || cl.String() != "resumable for 10m0s" {
		t.Errorf("owners: resumable: %+v", cl)
	}
	if c.Clients.Pos.Line != 1 {
		t.Errorf("section position %+v, want line 1", c.Clients.Pos)
	}
	c = mustParse(t, `clients:
  owners: resumable
  releaseGrace: 30s
  resumeWithin: 24h
  tokens:
    - name: ci
      token: ${DSH_CI_TOKEN}
    - {name: laptop.2, token: `+strings.Repeat("x", 32)+`}
plugins: []
`, map[string]string{"DSH_CI_TOKEN": ciTok})
	cl := c.Clients
	if cl.ReleaseGrace != 30*time.Second || cl.ResumeWithin != 24*time.Hour || len(cl.Tokens) != 2 {
		t.Fatalf("full section: %+v", cl)
	}
	if tk := cl.Tokens[0]; tk.Name != "ci" || tk.Token != ciTok || tk.Pos.Line != 6 {
		t.Errorf("interpolated token: %+v", tk)
	}
	if tk := cl.Tokens[1]; tk.Name != "laptop.2" || tk.Token != strings.Repeat("x", 32) || tk.Pos.Line != 8 {
		t.Errorf("literal token: %+v", tk)
	}
	c = mustParse(t, "clients:\n  owners: connection\n  releaseGrace: 1h\nplugins: []\n", nil)
	if cl := c.Clients; cl.Resumable() || cl.ReleaseGrace != time.Hour || cl.ResumeWithin != 0 {
		t.Errorf("connection owners with a grace: %+v", cl)
	}
}

// Every mistake in the clients section is reported at its line, and a
// token's value never appears in a message.
func TestClientsErrors(t *testing.T) {
	short := "short-secret-value"
	tok := func(name, token string) string {
		return "    - name: " + name + "\n      token: " + token + "\n"
	}
	for src, want := range map[string]string{
		"clients: resumable\n":                                                                `x.yaml:1:10: clients must be a map with keys owners, releaseGrace, resumeWithin, tokens, got the string "resumable"`,
		"clients:\n  owner: resumable\n":                                                      `x.yaml:2:3: unknown clients key "owner" (allowed: owners, releaseGrace, resumeWithin, tokens)`,
		"clients:\n  owners: session\n":                                                       `x.yaml:2:11: clients.owners: want connection or resumable, got the string "session"`,
		"clients:\n  owners: [resumable]\n":                                                   `x.yaml:2:11: clients.owners: want connection or resumable, got a list`,
		"clients:\n  releaseGrace: soon\n":                                                    `x.yaml:2:17: clients.releaseGrace: want a positive Go duration up to 1h0m0s such as "30s" or "10m", got the string "soon"`,
		"clients:\n  releaseGrace: 0s\n":                                                      `x.yaml:2:17: clients.releaseGrace: want a positive Go duration up to 1h0m0s`,
		"clients:\n  releaseGrace: 2h\n":                                                      `x.yaml:2:17: clients.releaseGrace: want a positive Go duration up to 1h0m0s`,
		"clients:\n  releaseGrace: 30\n":                                                      `x.yaml:2:17: clients.releaseGrace: want a positive Go duration up to 1h0m0s such as "30s" or "10m", got the number 30`,
		"clients:\n  owners: resumable\n  resumeWithin: -1m\n":                                `x.yaml:3:17: clients.resumeWithin: want a positive Go duration up to 24h0m0s`,
		"clients:\n  owners: resumable\n  resumeWithin: 25h\n":                                `x.yaml:3:17: clients.resumeWithin: want a positive Go duration up to 24h0m0s such as "30s" or "10m", got the string "25h"`,
		"clients:\n  resumeWithin: 5m\n":                                                      `x.yaml:2:3: clients.resumeWithin applies to resumable owners only: add owners: resumable, or remove it`,
		"clients:\n  owners: connection\n  resumeWithin: 5m\n":                                `x.yaml:3:3: clients.resumeWithin applies to resumable owners only`,
		"clients:\n  tokens: " + ciTok + "\n":                                                 `x.yaml:2:11: clients.tokens must be a list of {name, token}, got a string`,
		"clients:\n  tokens:\n    - " + ciTok + "\n":                                          `x.yaml:3:7: clients.tokens entry 1 must be a map with name, token, got a string`,
		"clients:\n  tokens: {name: ci}\n":                                                    `x.yaml:2:11: clients.tokens must be a list of {name, token}, got a map`,
		"clients:\n  tokens:\n    - ci\n":                                                     `x.yaml:3:7: clients.tokens entry 1 must be a map with name, token, got a string`,
		"clients:\n  tokens:\n" + tok("ci", ciTok) + "    - 5\n":                              `x.yaml:5:7: clients.tokens entry 2 must be a map with name, token, got the number 5`,
		"clients:\n  tokens:\n" + tok("c i", ciTok):                                           `x.yaml:3:13: clients.tokens entry 1: name: want letters, digits, '.', '_' or '-' (at most 64), got the string "c i"`,
		"clients:\n  tokens:\n" + tok("-ci", ciTok):                                           `x.yaml:3:13: clients.tokens entry 1: name: want letters, digits`,
		"clients:\n  tokens:\n" + tok(strings.Repeat("n", 65), ciTok):                         `x.yaml:3:13: clients.tokens entry 1: name: want letters, digits, '.', '_' or '-' (at most 64)`,
		"clients:\n  tokens:\n" + tok("ci", short):                                            `x.yaml:4:14: clients.tokens entry 1: token: want a string of at least 32 characters without spaces (such as ${NAME} holding ` + "`openssl rand -hex 32`)",
		"clients:\n  tokens:\n" + tok("ci", `"`+ciTok+` x"`):                                  `x.yaml:4:14: clients.tokens entry 1: token: want a string of at least 32 characters without spaces`,
		"clients:\n  tokens:\n" + tok("ci", "12345678901234567890123456789012345"):            `x.yaml:4:14: clients.tokens entry 1: token: want a string of at least 32 characters`,
		"clients:\n  tokens:\n    - name: ci\n      token: " + ciTok + "\n      scope: all\n": `x.yaml:5:7: unknown clients.tokens key "scope" (allowed: name, token)`,
		"clients:\n  tokens:\n    - name: ci\n":                                               `x.yaml:3:7: clients.tokens entry 1 needs both name and token`,
		"clients:\n  tokens:\n    - token: " + ciTok + "\n":                                   `x.yaml:3:7: clients.tokens entry 1 needs both name and token`,
		"clients:\n  tokens:\n" + tok("ci", ciTok) + tok("ci", strings.Repeat("y", 40)):       `x.yaml:5:7: clients.tokens entry 2: the name "ci" is entry 1's already`,
		"clients:\n  tokens:\n" + tok("ci", ciTok) + tok("laptop", ciTok):                     `x.yaml:5:7: clients.tokens entry 2: the same token as entry 1`,
	} {
		_, err := Parse("compositions/x.yaml", []byte(src+"plugins: []\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s", src, err, want)
			continue
		}
		for _, secret := range []string{short, ciTok} {
			if strings.Contains(err.Error(), secret) && !strings.Contains(want, secret) {
				t.Errorf("%q: the message carries the token: %v", src, err)
			}
		}
	}
	// A token interpolated from the environment is checked as its value,
	// and its value is not repeated either.
	src := "clients:\n  tokens:\n    - name: ci\n      token: ${DSH_CI_TOKEN}\nplugins: []\n"
	_, err := Parse("compositions/x.yaml", []byte(src), env(map[string]string{"DSH_CI_TOKEN": short}))
	if err == nil || !strings.Contains(err.Error(), "x.yaml:4:14: clients.tokens entry 1: token: want a string of at least 32") || strings.Contains(err.Error(), short) {
		t.Errorf("a short token from the environment: %v", err)
	}
	if _, err := Parse("compositions/x.yaml", []byte(src), env(nil)); err == nil || !strings.Contains(err.Error(), "DSH_CI_TOKEN") {
		t.Errorf("an unset token variable: %v", err)
	}
}

// Masked shows the clients section with every token masked: from a
// variable with a credential-like name, from one without, or written out.
func TestClientsMasked(t *testing.T) {
	if _, ok := mustParse(t, "plugins: []\n", nil).Masked()["clients"]; ok {
		t.Errorf("no clients section, but Masked has one")
	}
	plain, literal := strings.Repeat("p", 40), strings.Repeat("l", 40)
	c := mustParse(t, `clients:
  owners: resumable
  releaseGrace: 2s
  tokens:
    - {name: ci, token: "${DSH_CI_TOKEN}"}
    - {name: "${WHO}", token: "${LAPTOP}"}
    - {name: literal, token: `+literal+`}
plugins: []
`, map[string]string{"DSH_CI_TOKEN": ciTok, "LAPTOP": plain, "WHO": "laptop"})
	got := c.Masked()["clients"]
	want := map[string]any{
		"owners":       "resumable",
		"releaseGrace": "2s",
		"resumeWithin": "10m0s",
		"tokens": []any{
			map[string]any{"name": "ci", "token": masked},
			map[string]any{"name": "laptop", "token": masked},
			map[string]any{"name": "literal", "token": masked},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("masked clients:\n got %#v\nwant %#v", got, want)
	}
	if c.Clients.Tokens[0].Token != ciTok || c.Clients.Tokens[1].Token != plain || c.Clients.Tokens[2].Token != literal {
		t.Errorf("Masked changed the composition: %+v", c.Clients.Tokens)
	}
	// A name from a credential-like variable is masked as any such value.
	c = mustParse(t, "clients:\n  tokens:\n    - {name: \"${CI_SECRET}\", token: "+literal+"}\nplugins: []\n", map[string]string{"CI_SECRET": "ci"})
	if got := c.Masked()["clients"].(map[string]any)["tokens"].([]any)[0]; !reflect.DeepEqual(got, map[string]any{"name": masked, "token": masked}) {
		t.Errorf("a name from a secret-looking variable: %#v", got)
	}
}
