package screen

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzScreen feeds random output in pieces, with random resizes and
// reads between them: nothing a program prints and no size may panic out
// of the Screen. The seeds are the sequences the emulator is known to
// have failed on.
func FuzzScreen(f *testing.F) {
	f.Add([]byte("\x1b[?69h\x1b[1;80s\x1b[L"), []byte{79, 23})
	f.Add([]byte("top\r\n\x1b[?69h\x1b[1;80s"+strings.Repeat("\r\n", 30)), []byte{39, 23, 9, 4})
	f.Add([]byte("\x1b[1;50r\x1bM\x1bM\x1b[50;1H\r\n\r\n"), []byte{20, 5})
	f.Add([]byte("\x1b7\x1b[24;80H\x1b8x\x1b[?1049h\x1b[2J\x1bc"), []byte{0, 0, 200, 100})
	f.Add([]byte("a\x1b[2147483646b\x1b[2147483646X"), []byte{9, 2})
	f.Add([]byte(numbered(1, 200)), []byte{10, 3})
	f.Add([]byte("\x80\x01\x02\x93\xff\xff\xa0\x10\x20x\xb5\x00\x00"), []byte{5, 5, 100, 50})
	f.Fuzz(func(t *testing.T, out, sizes []byte) {
		s := New(80, 24, nil)
		defer s.Close()
		s.noPlain = len(out)%2 == 1
		s.OnReset(func(fl Failure) {
			t.Logf("reset during %s: %v\n%s", fl.Op, fl.Panic, fl.Stack)
		})
		out = expand(out)
		pieces := len(sizes)/2 + 1
		for i := range pieces {
			_, _ = s.Write(out[i*len(out)/pieces : (i+1)*len(out)/pieces])
			if 2*i+1 < len(sizes) {
				s.Resize(int(sizes[2*i])%200+1, int(sizes[2*i+1])%60+1)
			}
			r := s.Read(1 << 20)
			cols, rows := s.Size()
			if n := strings.Count(r.Viewport, "\n") + 1; n > rows {
				t.Fatalf("%d rows on a screen of %d×%d", n, cols, rows)
			}
		}
	})
}

// expand makes random input reach the emulator's handlers often: a byte
// below 0x80 stands for itself, one above for an escape sequence it
// picks, with parameters from the two bytes after it.
func expand(in []byte) []byte {
	param := func(b byte) int {
		if b >= 0xf0 {
			return int(b-0xf0) * 1000000 // counts far past the screen
		}
		return int(b)
	}
	var out []byte
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c < 0x80 {
			out = append(out, c)
			continue
		}
		var a, b int
		if i+2 < len(in) {
			a, b = param(in[i+1]), param(in[i+2])
			i += 2
		}
		out = append(out, sequences[int(c-0x80)%len(sequences)](a, b)...)
	}
	return out
}

var modes = []int{1, 3, 5, 6, 7, 25, 47, 66, 69, 1047, 1048, 1049, 2004, 2026}

var sequences = func() []func(a, b int) string {
	var seqs []func(a, b int) string
	for _, final := range "@ABCDEFGHIJKLMPSTXZ`abdefghlmnrsu" {
		seqs = append(seqs, func(a, b int) string { return fmt.Sprintf("\x1b[%d;%d%c", a, b, final) })
	}
	for _, set := range "hl" {
		seqs = append(seqs, func(a, _ int) string { return fmt.Sprintf("\x1b[?%d%c", modes[a%len(modes)], set) })
	}
	for _, esc := range []string{"\x1b7", "\x1b8", "\x1bM", "\x1bD", "\x1bE", "\x1bc", "\x1bH", "\x1b#8", "\x1b(0", "\x1b(B", "\x1b[!p", "\x1b[6n", "\x1b[s", "\x1b[u"} {
		seqs = append(seqs, func(int, int) string { return esc })
	}
	for _, text := range []string{"世界", "e\u0301", "👍🏽", "\t", "\b", strings.Repeat("x", 100)} {
		seqs = append(seqs, func(int, int) string { return text })
	}
	return seqs
}()
