package screen

import (
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
	f.Add([]byte(numbered(1, 200)), []byte{10, 3})
	f.Fuzz(func(t *testing.T, out, sizes []byte) {
		s := New(80, 24, nil)
		defer s.Close()
		s.noPlain = len(out)%2 == 1
		s.OnReset(func(fl Failure) {
			t.Logf("reset during %s: %v\n%s", fl.Op, fl.Panic, fl.Stack)
		})
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
