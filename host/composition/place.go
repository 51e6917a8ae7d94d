package composition

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// place records where each value of a tree is written, so that a problem
// found in the decoded value (a config checked against a plugin's schema)
// is reported at that value. A nil *place knows nothing.
type place struct {
	at     Pos // the value (for an alias, where the alias is)
	key    Pos // its key in the parent map; at for list items and the root
	fields map[string]*place
	items  []*place
}

func (pl *place) field(name string) *place {
	if pl == nil {
		return nil
	}
	return pl.fields[name]
}

func (pl *place) item(i int) *place {
	if pl == nil || i < 0 || i >= len(pl.items) {
		return nil
	}
	return pl.items[i]
}

// find follows a JSON pointer ("" is pl itself, "/a/0/b" a descendant)
// and returns the deepest place on its way and whether that is the whole
// pointer.
func (pl *place) find(pointer string) (*place, bool) {
	if pl == nil {
		return nil, false
	}
	if pointer == "" {
		return pl, true
	}
	cur := pl
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		next := cur.field(tok)
		if next == nil && cur.items != nil {
			if i, err := strconv.Atoi(tok); err == nil {
				next = cur.item(i)
			}
		}
		if next == nil {
			return cur, false
		}
		cur = next
	}
	return cur, true
}

// placeOf builds the places of n's value as the decoder sees it (aliases
// followed, merges applied); n must be free of alias cycles.
func (p *parser) placeOf(n *yaml.Node) *place {
	memo := map[*yaml.Node]*place{}
	var of func(n *yaml.Node) *place
	of = func(n *yaml.Node) *place {
		r := resolve(n)
		if r == nil {
			return nil
		}
		pl, ok := memo[r]
		if !ok {
			pl = &place{at: p.pos(r)}
			switch r.Kind {
			case yaml.MappingNode:
				pl.fields = map[string]*place{}
				for _, kp := range pairs(r) {
					if f := of(kp.val); f != nil {
						pl.fields[kp.name] = f.under(p.pos(kp.key))
					}
				}
			case yaml.SequenceNode:
				pl.items = make([]*place, len(r.Content))
				for i, c := range r.Content {
					pl.items[i] = of(c)
				}
			}
			pl.key = pl.at
			memo[r] = pl
		}
		if n != r {
			// The value is used where the alias is.
			cp := *pl
			cp.at, cp.key = p.pos(n), p.pos(n)
			pl = &cp
		}
		return pl
	}
	return of(n)
}

// under is pl as the value of a key at key: a copy, as one value may sit
// under several keys (through an alias or a merge).
func (pl *place) under(key Pos) *place {
	cp := *pl
	cp.key = key
	return &cp
}
