package termsessions

import "strings"

// AtPrompt reports whether output ends at prompt: the prompt's bytes, then
// nothing but terminal control sequences (a line editor's own, such as
// bracketed paste or an erase to the end of the line).
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

// onlyControls reports whether b is nothing but CSI and OSC sequences.
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
		default:
			return false
		}
	}
	return true
}
