package composition

import (
	"fmt"
	"regexp"
	"strings"
)

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand interpolates s: ${VAR}, ${VAR:-default}, ${VAR:?message} and $$.
// It returns the expanded text, the names of the variables referred to (in
// order, each once) and one message per problem. A reference that fails
// expands to "".
func expand(s string, lookup func(string) (string, bool)) (out string, vars []string, problems []string) {
	if !strings.Contains(s, "$") {
		return s, nil, nil
	}
	var b strings.Builder
	seen := map[string]bool{}
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			problems = append(problems, fmt.Sprintf("unterminated reference %q: missing }", s[i:]))
			break
		}
		ref := s[i : i+2+end+1]
		expr := s[i+2 : i+2+end]
		i += 2 + end + 1

		name, op, arg := expr, byte(0), ""
		if k := strings.IndexByte(expr, ':'); k >= 0 {
			name = expr[:k]
			rest := expr[k+1:]
			if rest == "" || (rest[0] != '-' && rest[0] != '?') {
				problems = append(problems, fmt.Sprintf("bad reference %q: want ${VAR}, ${VAR:-default} or ${VAR:?message}", ref))
				continue
			}
			op, arg = rest[0], rest[1:]
		}
		if !varNameRE.MatchString(name) {
			problems = append(problems, fmt.Sprintf("bad reference %q: want ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR matching %s", ref, varNameRE))
			continue
		}
		if !seen[name] {
			seen[name] = true
			vars = append(vars, name)
		}
		v, ok := lookup(name)
		switch op {
		case 0:
			if !ok {
				problems = append(problems, fmt.Sprintf("environment variable %s is not set (write ${%s:-default} to make it optional)", name, name))
				continue
			}
		case '-':
			if !ok || v == "" {
				v = arg
			}
		case '?':
			if !ok || v == "" {
				msg := arg
				if msg == "" {
					msg = "required"
				}
				problems = append(problems, fmt.Sprintf("environment variable %s is unset or empty: %s", name, msg))
				continue
			}
		}
		b.WriteString(v)
	}
	return b.String(), vars, problems
}
