package retention

import (
	"math"
	"testing"
)

func TestFormatNotice(t *testing.T) {
	for _, tc := range []struct {
		o    Omitted
		want string
	}{
		{Omitted{}, ""},
		{Omitted{Bytes: 1, Lines: 1}, "[1 byte (1 line) omitted]"},
		{Omitted{Bytes: 2, Lines: 1}, "[2 bytes (1 line) omitted]"},
		{Omitted{Bytes: 1234, Lines: 56}, "[1,234 bytes (56 lines) omitted]"},
		{Omitted{Bytes: 999, Lines: 999}, "[999 bytes (999 lines) omitted]"},
		{Omitted{Bytes: 1000, Lines: 1000}, "[1,000 bytes (1,000 lines) omitted]"},
		{Omitted{Bytes: 1234567, Lines: 12345}, "[1,234,567 bytes (12,345 lines) omitted]"},
		{Omitted{Bytes: math.MaxInt64, Lines: 1}, "[9,223,372,036,854,775,807 bytes (1 line) omitted]"},
		{Omitted{Items: 1}, "[1 item omitted]"},
		{Omitted{Items: 12}, "[12 items omitted]"},
		{Omitted{Items: 100000}, "[100,000 items omitted]"},
		{Omitted{Bytes: 5}, "[5 bytes omitted]"},
		{Omitted{Lines: 3}, "[3 lines omitted]"},
		{Omitted{Lines: 1}, "[1 line omitted]"},
		{Omitted{Bytes: 10, Lines: 1, Items: 2}, "[10 bytes (1 line), 2 items omitted]"},
		{Omitted{Bytes: -3, Lines: -1, Items: -2}, ""},
		{Omitted{Bytes: 4, Lines: -1}, "[4 bytes omitted]"},
	} {
		if got := FormatNotice(tc.o); got != tc.want {
			t.Errorf("FormatNotice(%+v) = %q, want %q", tc.o, got, tc.want)
		}
		if got := tc.o.Any(); got != (tc.want != "") {
			t.Errorf("%+v.Any() = %v", tc.o, got)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{
		0:             "0",
		7:             "7",
		999:           "999",
		1000:          "1,000",
		-1000:         "-1,000",
		-999:          "-999",
		123456:        "123,456",
		1234567:       "1,234,567",
		math.MinInt64: "-9,223,372,036,854,775,808",
	} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
