package composition

import (
	"encoding/json"
	"fmt"

	"github.com/dshrun/dsh/internal/schemacheck"
)

// ValidateConfig validates cfg, the config of entry e (merging in settings is
// the caller's job), against the JSON Schema document schemaJSON; an empty
// schema accepts anything. Each violation is an *Error at e.ConfigPos (e.Pos
// when unset) naming its JSON pointer in cfg; they come joined.
func ValidateConfig(e Entry, cfg map[string]any, schemaJSON []byte) error {
	pos := e.ConfigPos
	if pos.Line == 0 {
		pos = e.Pos
	}
	fail := func(format string, args ...any) *Error {
		return &Error{Pos: pos, ID: e.ID, Msg: fmt.Sprintf(format, args...)}
	}
	sch, err := schemacheck.Compile(schemaJSON)
	if err != nil {
		return fail("the plugin's config %v", err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	// Through JSON, as the plugin will see it.
	b, err := json.Marshal(cfg)
	if err != nil {
		return fail("config cannot be written as JSON: %v", err)
	}
	vs, err := sch.Validate(b)
	if err != nil {
		return fail("config: %v", err)
	}
	var errs []*Error
	for _, v := range vs {
		errs = append(errs, fail("%s: %s", v.Where("config"), v.Message))
	}
	return joinErrors(errs)
}
