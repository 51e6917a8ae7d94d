package retention_test

import (
	"fmt"
	"strings"

	"github.com/dshrun/dsh/host/procs/retention"
)

func Example() {
	r := retention.NewTextRetainer(retention.HeadTail, 20)
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(r, "line %04d\n", i)
	}
	fmt.Print(r.Result())
	// Output:
	// line 0001
	// [9,980 bytes (998 lines) omitted]
	// line 1000
}

func ExampleTextRetainer_tail() {
	r := retention.NewTextRetainer(retention.Tail, 10)
	r.Write([]byte("héllo wörld, ünïcödé"))
	// The last 10 bytes begin with the second byte of "ü": the cut moves
	// forward past it, and that byte counts as omitted.
	res := r.Result()
	fmt.Printf("%q of %d bytes, %+v\n", res.Tail, res.Total, res.Omitted)
	// Output:
	// "nïcödé" of 26 bytes, {Bytes:17 Items:0 Lines:1}
}

func ExampleItemRetainer() {
	r := retention.NewItemRetainer[string](2)
	for _, p := range strings.Fields("a.go b.go c.go d.go") {
		r.Add(p)
	}
	fmt.Println(r.Items(), retention.FormatNotice(r.Omitted()))
	// Output:
	// [a.go b.go] [2 items omitted]
}

func ExampleFormatNotice() {
	fmt.Println(retention.FormatNotice(retention.Omitted{Bytes: 1234, Lines: 56}))
	fmt.Println(retention.FormatNotice(retention.Omitted{Bytes: 1, Lines: 1}))
	fmt.Printf("%q\n", retention.FormatNotice(retention.Omitted{}))
	// Output:
	// [1,234 bytes (56 lines) omitted]
	// [1 byte (1 line) omitted]
	// ""
}
