package composition

import (
	"math"
	"strconv"
	"strings"
)

// Spill is host.spill: the disk budgets of spill files (the full output of
// commands whose result was cut). 0 is the default.
type Spill struct {
	// Total caps all spill files of the host together (default 1 GiB).
	Total int64
	// PerOwner caps the spill files of one owner (an MCP session, a
	// `dsh call`) together, so one cannot starve the others (default a
	// quarter of Total).
	PerOwner int64
}

var spillKeys = []string{"total", "perOwner"}

// defaultSpillTotal mirrors the subprocess service's default, to check
// perOwner against when total is not given.
const defaultSpillTotal = 1 << 30

// spill reads host.spill: sizes in bytes, as a number or a string with a
// unit (KiB, MiB, GiB).
func (p *parser) spill(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil && p.usable(kp.val) {
			p.errorf(kp.val, "host.spill must be a map with total and perOwner, got %s", describe(v))
		}
		return
	}
	var ownerPair *pair
	for _, sp := range pairs(kp.val) {
		var dst *int64
		switch sp.name {
		case "total":
			dst = &c.Host.Spill.Total
		case "perOwner":
			dst = &c.Host.Spill.PerOwner
			ownerPair = &sp
		default:
			p.errorf(sp.key, "unknown host.spill key %q (allowed: %s)", sp.name, strings.Join(spillKeys, ", "))
			continue
		}
		if !p.usable(sp.val) || m[sp.name] == nil {
			continue
		}
		n, ok := byteSize(m[sp.name])
		if !ok {
			p.errorf(sp.val, "bad size for host.spill.%s: got %s, want a positive number of bytes or a size such as \"256MiB\" or \"1GiB\"", sp.name, describe(m[sp.name]))
			continue
		}
		*dst = n
	}
	total := c.Host.Spill.Total
	if total == 0 {
		total = defaultSpillTotal
	}
	if ownerPair != nil && c.Host.Spill.PerOwner > total {
		p.errorf(ownerPair.val, "host.spill.perOwner (%d bytes) is more than the host's total (%d bytes): one owner could still starve the others", c.Host.Spill.PerOwner, total)
	}
}

// byteSize reads a positive size: a number of bytes, or a string of digits
// with an optional unit B, KiB, MiB or GiB.
func byteSize(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), v > 0
	case int64:
		return v, v > 0
	case uint64:
		return int64(v), v > 0 && v <= math.MaxInt64
	case string:
		num, unit := strings.TrimSpace(v), int64(1)
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
			if strings.HasSuffix(num, u.suffix) {
				num, unit = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
				break
			}
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 || n > math.MaxInt64/unit {
			return 0, false
		}
		return n * unit, true
	}
	return 0, false
}
