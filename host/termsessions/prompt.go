package termsessions

import "strings"

// AtPrompt reports whether output ends at prompt: the prompt's bytes, then
// nothing but terminal control sequences (a line editor's own, such as
// bracketed paste or an erase to the end of the line, or the keypad mode
// a .NET console sets as it reads: ESC [ ? 1 h ESC =).
func AtPrompt(output, prompt []byte) bool {
	if len(prompt) == 0 {
		return false
	}
	i := lastIndex(output, prompt)
	if i < 0 {
		return false
	}
	return onlyControls(output[i+len(prompt):])
}

func lastIndex(b, sub []byte) int {
	return strings.LastIndex(string(b), string(sub))
}

// onlyControls reports whether b is nothing but CSI and OSC sequences and
// two-byte escape sequences (ESC then a final byte, such as ESC = or ESC 7,
// with any intermediate bytes before it, such as ESC ( B).
func onlyControls(b []byte) bool {
	for len(b) > 0 {
		if b[0] != 0x1b || len(b) < 2 {
			return false
		}
		switch b[1] {
		case '[': // CSI: parameters, intermediates, one final byte
			j := 2
			for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
				j++
			}
			if j == len(b) {
				return false
			}
			b = b[j+1:]
		case ']': // OSC: up to BEL or ST
			j := 2
			for j < len(b) && b[j] != 0x07 && !(b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\') {
				j++
			}
			switch {
			case j == len(b):
				return false
			case b[j] == 0x07:
				b = b[j+1:]
			default:
				b = b[j+2:]
			}
		case 'P', 'X', '^', '_': // strings (DCS, SOS, PM, APC): not told apart from output here
			return false
		default: // intermediates, then one final byte
			j := 1
			for j < len(b) && b[j] >= 0x20 && b[j] <= 0x2f {
				j++
			}
			if j == len(b) || b[j] < 0x30 || b[j] > 0x7e {
				return false
			}
			b = b[j+1:]
		}
	}
	return true
}
