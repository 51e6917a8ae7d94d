package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	fence      = regexp.MustCompile("(?s)```.*?```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	mdLink     = regexp.MustCompile(`\]\(([^()\s]+)\)`)
)

// anchors are the ids GitHub gives a page's headings: lower case, spaces
// to hyphens, punctuation (backticks, colons, dots, parentheses) dropped,
// a repeated heading suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fence.ReplaceAllString(text, ""), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			seen[id]++
			id = fmt.Sprintf("%s-%d", id, n)
		} else {
			seen[id] = 1
		}
		out[id] = true
	}
	return out
}

// Every relative link in README.md and docs/ names a file of the
// repository, and an anchor names a heading of the page it points into.
func TestDocLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	for _, page := range pages(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text := inlineCode.ReplaceAllString(fence.ReplaceAllString(string(raw), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into %s, which is no page", page, target, dest)
				continue
			}
			body, err := os.ReadFile(filepath.Join(root, dest))
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(body))[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in README.md or docs/")
	}
}
