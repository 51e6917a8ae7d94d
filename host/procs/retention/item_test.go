package retention

import (
	"slices"
	"testing"
)

func TestItemRetainer(t *testing.T) {
	for _, tc := range []struct {
		max, n int
	}{
		{-1, 0}, {-1, 3}, {0, 0}, {0, 2}, {1, 0}, {1, 1}, {1, 5}, {3, 2}, {3, 3}, {3, 4}, {10, 100}, {100, 10},
	} {
		r := NewItemRetainer[string](tc.max)
		var want []string
		for i := range tc.n {
			item := string(rune('a' + i%26))
			kept := r.Add(item)
			if kept != (i < tc.max) {
				t.Errorf("max %d: Add #%d = %v", tc.max, i, kept)
			}
			if kept {
				want = append(want, item)
			}
		}
		if got := r.Items(); !slices.Equal(got, want) {
			t.Errorf("max %d n %d: Items = %q, want %q", tc.max, tc.n, got, want)
		}
		wantOmitted := Omitted{Items: int64(tc.n - len(want))}
		if got := r.Omitted(); got != wantOmitted {
			t.Errorf("max %d n %d: Omitted = %+v, want %+v", tc.max, tc.n, got, wantOmitted)
		}
		if r.Total() != int64(tc.n) {
			t.Errorf("max %d n %d: Total = %d", tc.max, tc.n, r.Total())
		}
		if cap(r.items) > max(tc.max, 0) {
			t.Errorf("max %d: holds room for %d items", tc.max, cap(r.items))
		}
	}
}

func TestItemRetainerItemsIsACopy(t *testing.T) {
	r := NewItemRetainer[int](3)
	r.Add(1)
	r.Add(2)
	got := r.Items()
	got[0] = 99
	_ = append(got, 100)
	r.Add(3)
	if items := r.Items(); !slices.Equal(items, []int{1, 2, 3}) {
		t.Fatalf("Items = %v after changing a returned slice", items)
	}
}

func TestZeroItemRetainer(t *testing.T) {
	var r ItemRetainer[struct{}]
	if r.Add(struct{}{}) || r.Items() != nil || r.Omitted() != (Omitted{Items: 1}) || r.Total() != 1 {
		t.Fatalf("zero ItemRetainer kept something: %+v", r)
	}
	if got := FormatNotice(r.Omitted()); got != "[1 item omitted]" {
		t.Fatalf("notice %q", got)
	}
}
