package randid

import (
	"regexp"
	"testing"
)

func TestNew(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !form.MatchString(id) || seen[id] {
			t.Fatalf("id %q: want 32 hex digits, each id new", id)
		}
		seen[id] = true
	}
}
