package hub

// The protobuf contracts of the first-party seams are linked in so the hub
// knows each method's kind even from a provider whose description does
// not list its methods (one not built with the SDK): known unary calls
// take the one-Invoke relay, known streams are not counted as in-flight
// calls a reload waits for. SDK plugins describe their methods' kinds
// themselves, which is how a third party's contract gets the same
// treatment; a method known neither way is relayed as a stream.
import (
	_ "github.com/dshrun/dsh/plugins/shell/shellv1"
	_ "github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)
