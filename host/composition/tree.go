package composition

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file holds the yaml.Node side of reading: positions, syntax errors,
// and the pass that interpolates and cleans the tree before koanf reads it.

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// pair is one effective key of a mapping.
type pair struct {
	name     string
	key, val *yaml.Node
}

// pairs returns the effective keys of mapping n in order: its own keys, then
// those merged in with <<, the first definition of a key winning (the way
// yaml.v3 decodes merges). n must be free of alias cycles.
func pairs(n *yaml.Node) []pair {
	var out []pair
	seen := map[string]bool{}
	var add func(m *yaml.Node)
	add = func(m *yaml.Node) {
		m = resolve(m)
		if m == nil || m.Kind != yaml.MappingNode {
			return
		}
		var merges []*yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if isMerge(k) {
				merges = append(merges, v)
				continue
			}
			name := keyName(k)
			if seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, pair{name: name, key: k, val: v})
		}
		for _, mv := range merges {
			mv = resolve(mv)
			if mv != nil && mv.Kind == yaml.SequenceNode {
				for _, item := range mv.Content {
					add(item)
				}
				continue
			}
			add(mv)
		}
	}
	add(n)
	return out
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// keyName is the string a key becomes in the decoded maps: its text for a
// string, else its decoded value printed with %v (as koanf does).
func keyName(k *yaml.Node) string {
	k = resolve(k)
	if k == nil {
		return ""
	}
	if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!str" {
		return k.Value
	}
	var v any
	if err := k.Decode(&v); err != nil {
		return k.Value
	}
	return fmt.Sprintf("%v", v)
}

// syntaxError turns a yaml.v3 parse error into an *Error with the right line.
func syntaxError(file string, data []byte, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if parserProblems[msg] {
			// yaml.v3 reports the 0-based line of parser (not scanner)
			// errors.
			line++
		}
	} else if m := unknownAnchorRE.FindStringSubmatch(msg); m != nil {
		line = lineOf(data, regexp.MustCompile(`\*`+regexp.QuoteMeta(m[1])+`(?:[\s,\]}]|$)`))
	}
	if line == 0 {
		// yaml.v3 leaves the line out when the problem is on the first.
		line = 1
	}
	return &Error{Pos: Pos{File: file, Line: line}, Msg: "malformed YAML: " + msg, err: err}
}

var (
	yamlLineRE      = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// parserProblems are the messages yaml.v3 raises from its parser rather than
// its scanner.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// lineOf is the 1-based line of re's first match in data, or 0.
func lineOf(data []byte, re *regexp.Regexp) int {
	loc := re.FindIndex(data)
	if loc == nil {
		return 0
	}
	return 1 + strings.Count(string(data[:loc[0]]), "\n")
}

// prepare walks the tree once: it interpolates string scalars, checks the
// other scalars decode, drops (and reports) duplicate and non-scalar keys so
// that the decoder accepts the tree, and reports alias cycles. It returns
// false when the tree has a cycle and must not be walked further.
func (p *parser) prepare(root *yaml.Node) bool {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*yaml.Node]int{}
	ok := true
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || state[n] != 0 {
			return
		}
		state[n] = visiting
		defer func() { state[n] = done }()
		switch n.Kind {
		case yaml.AliasNode:
			if state[n.Alias] == visiting {
				p.errorf(n, "alias *%s refers to a value that contains it", n.Value)
				ok = false
				return
			}
			walk(n.Alias)
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			p.cleanKeys(n)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if isMerge(k) && !p.checkMerge(v) {
					v = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Line, Column: v.Column}
					n.Content[i+1] = v
				}
				if k.Kind == yaml.AliasNode {
					walk(k)
				}
				walk(v)
			}
		case yaml.ScalarNode:
			p.scalar(n)
		}
	}
	walk(root)
	return ok
}

// cleanKeys reports and removes the keys of mapping n the decoder would
// refuse (duplicates, keys that are not scalars) and makes the other keys
// strings.
func (p *parser) cleanKeys(n *yaml.Node) {
	seen := map[string]*yaml.Node{}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		rk := resolve(k)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			p.errorf(k, "a map key must be a plain value, not a %s", kindName(rk))
			p.errs[len(p.errs)-1].node = n // k leaves the tree
			continue
		}
		if first, dup := seen[rk.Value]; dup {
			p.errorf(k, "duplicate key %q (first at line %d)", rk.Value, first.Line)
			p.errs[len(p.errs)-1].node = n
			continue
		}
		if k.Kind == yaml.ScalarNode && !isMerge(k) && k.ShortTag() != "!!str" {
			// Keys are kept as written (1, true, null, 0x10): configs
			// travel as JSON, whose keys are strings.
			k.Tag = "!!str"
		}
		seen[rk.Value] = k
		kept = append(kept, k, v)
	}
	n.Content = kept
}

// checkMerge reports a << whose value is not a map or a list of maps.
func (p *parser) checkMerge(v *yaml.Node) bool {
	isMap := func(n *yaml.Node) bool {
		n = resolve(n)
		return n != nil && n.Kind == yaml.MappingNode
	}
	rv := resolve(v)
	good := isMap(v)
	if rv != nil && rv.Kind == yaml.SequenceNode {
		good = true
		for _, item := range rv.Content {
			good = good && isMap(item)
		}
	}
	if !good {
		p.errorf(v, "<< merges a map or a list of maps, not a %s", kindName(rv))
	}
	return good
}

// scalar interpolates a string scalar, or checks that another one decodes.
func (p *parser) scalar(n *yaml.Node) {
	switch n.ShortTag() {
	case "!!str":
		out, vars, problems := expand(n.Value, p.lookup)
		for _, msg := range problems {
			p.errorf(n, "%s", msg)
		}
		if len(problems) > 0 {
			p.failed[n] = true
		}
		if len(vars) > 0 {
			p.vars[n] = vars
		}
		if out != n.Value {
			n.Value = out
			n.Tag = "!!str" // the encoder quotes it if it would read otherwise
		}
	case "!!timestamp":
		// Kept as written: configs travel as JSON, which has no time type.
		n.Tag = "!!str"
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			p.errorf(n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			p.failed[n] = true
			n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
		}
	}
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "plain value"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}
