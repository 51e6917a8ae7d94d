package host

// The protobuf contracts of the first-party seams are linked into the host
// so the hub knows each method's kind: known unary calls take the one-Invoke
// relay, known streams are not counted as in-flight calls a reload waits
// for. A third party's contract works without this, relayed as a stream.
import (
	_ "github.com/dshrun/dsh/plugins/shell/shellv1"
	_ "github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)
