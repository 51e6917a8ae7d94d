package host

import (
	"errors"
	"testing"

	"github.com/dshrun/dsh/host/composition"
)

// A LoadError counts the problems it lists: one joining several counts as
// each; every problem is one indented entry, its further lines indented
// beyond its first.
func TestLoadErrorListsEachProblemOnce(t *testing.T) {
	pos := func(line int) composition.Pos {
		return composition.Pos{File: "/elsewhere/c.yaml", Line: line, Column: 3}
	}
	e := &LoadError{File: "/elsewhere/c.yaml", Errs: []error{
		&EntryError{Pos: pos(2), ID: "a", Err: errors.New("it failed:\nfirst line\nsecond line\n")},
		errors.Join(
			&composition.Error{Pos: pos(5), ID: "b", Msg: "one"},
			&composition.Error{Pos: pos(6), ID: "b", Msg: "two"},
		),
	}}
	want := `/elsewhere/c.yaml: 3 problems:
  /elsewhere/c.yaml:2:3: plugin "a": it failed:
    first line
    second line
  /elsewhere/c.yaml:5:3: plugin "b": one
  /elsewhere/c.yaml:6:3: plugin "b": two`
	if got := e.Error(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if n := len(e.Problems()); n != 3 {
		t.Errorf("%d problems, want 3", n)
	}
	one := &LoadError{File: "c.yaml", Errs: []error{errors.New("it failed:\nwhy\n")}}
	if got, want := one.Error(), "it failed:\n  why"; got != want {
		t.Errorf("one problem: got %q, want %q", got, want)
	}
}
