package retention

// ItemRetainer bounds an ordered stream of logical units, such as the paths
// or the matches a tool found, keeping the first ones (v1 keeps only a
// head). Its memory is proportional to the number of items kept.
//
// The zero ItemRetainer keeps nothing and counts everything added.
type ItemRetainer[T any] struct {
	max   int
	items []T
	total int64
}

// NewItemRetainer returns a retainer that keeps the first maxItems items
// added to it; maxItems <= 0 keeps none.
func NewItemRetainer[T any](maxItems int) *ItemRetainer[T] {
	return &ItemRetainer[T]{max: max(maxItems, 0)}
}

// Add records item and reports whether it was kept; false means it was
// dropped and counted in [ItemRetainer.Omitted].
func (r *ItemRetainer[T]) Add(item T) bool {
	r.total++
	if len(r.items) >= r.max {
		return false
	}
	if len(r.items) == cap(r.items) {
		grown := make([]T, len(r.items), min(max(2*cap(r.items), 8), r.max))
		copy(grown, r.items)
		r.items = grown
	}
	r.items = append(r.items, item)
	return true
}

// Items returns a copy of the kept items in the order they were added; nil
// when none was kept.
func (r *ItemRetainer[T]) Items() []T {
	if len(r.items) == 0 {
		return nil
	}
	return append([]T(nil), r.items...)
}

// Omitted returns how many items were dropped (only Items is set).
func (r *ItemRetainer[T]) Omitted() Omitted {
	return Omitted{Items: r.total - int64(len(r.items))}
}

// Total returns the number of items added so far.
func (r *ItemRetainer[T]) Total() int64 { return r.total }
