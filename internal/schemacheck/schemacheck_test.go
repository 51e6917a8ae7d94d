package schemacheck

import (
	"sync"
	"testing"
)

// The metaschemas are compiled on first use (third_party/jsonschema, not
// at init): schemas compiled and checked at once from many goroutines, of
// two drafts, all load them once and all catch the same violations.
func TestConcurrentFirstCompile(t *testing.T) {
	docs := []string{
		`{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`,
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Go(func() {
			s, err := Compile([]byte(docs[i%2]))
			if err != nil {
				t.Error(err)
				return
			}
			vs, err := s.Validate([]byte(`{"n": "x"}`))
			if err != nil || len(vs) != 1 || vs[0].Pointer != "/n" {
				t.Errorf("draft %d: %v %v", i%2, vs, err)
			}
			if vs, err := s.Validate([]byte(`{"n": 1}`)); err != nil || len(vs) != 0 {
				t.Errorf("draft %d: a valid instance gave %v %v", i%2, vs, err)
			}
		})
	}
	wg.Wait()
	// A schema that breaks its metaschema is still refused.
	if _, err := Compile([]byte(`{"type": 12}`)); err == nil {
		t.Error(`{"type": 12} compiled`)
	}
}
