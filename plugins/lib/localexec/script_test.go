package localexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/plugins/shell"
)

// probe shows what a command sees of how it was run: $0, its stdin, an
// error's wording, `set -e`, whether descriptor 3 is open, the exit status.
// pad makes it longer without changing what it does.
func probe(pad int) string {
	return ": " + strings.Repeat("p", pad) + `
printf '0=%s\n' "$0"
printf 'stdin=%s\n' "$(cat)"
[ -e /proc/$BASHPID/fd/3 ] && echo fd3=open || echo fd3=closed
no_such_command_zz
set -e
false
echo not-reached
`
}

// A command longer than ArgvMax runs as a short one does: the same output,
// errors and exit status, whatever its size up to MaxCommand.
func TestLongCommandsRunAsShortOnes(t *testing.T) {
	e := realExecutor(t)
	e.ScriptArgv = BashScriptArgv
	run := func(cmd string) string {
		res, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd, Stdin: []byte("in put"), HasStdin: true})
		if err != nil {
			t.Fatalf("a command of %d bytes: %v", len(cmd), err)
		}
		return fmt.Sprintf("exit=%d signal=%q\nstdout:\n%sstderr:\n%s", res.GetExitCode(), res.Signal, res.Stdout.GetData(), res.Stderr.GetData())
	}
	short := run(probe(10))
	want := "exit=1 signal=\"\"\nstdout:\n0=bash\nstdin=in put\nfd3=closed\nstderr:\nbash: line 5: no_such_command_zz: command not found\n"
	if short != want {
		t.Fatalf("a short command:\n%s\nwant:\n%s", short, want)
	}
	for _, size := range []int{ArgvMax + 1, 200 << 10, 8 << 20} {
		if got := run(probe(size)); got != short {
			t.Fatalf("a command of %d bytes:\n%s\nwant what a short one gives:\n%s", size, got, short)
		}
	}
}

// Only a command longer than ArgvMax travels as a script; the rest keep
// their argument.
func TestScriptOnlyAboveArgvMax(t *testing.T) {
	stub := &stubSub{err: errors.New("x")}
	e := &Executor{Cfg: testConfig(), Sub: stub, Argv: bashArgv, ScriptArgv: BashScriptArgv}
	for _, n := range []int{1, ArgvMax, ArgvMax + 1} {
		cmd := strings.Repeat("x", n)
		_, _ = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd})
		g := stub.got
		script := n > ArgvMax
		switch {
		case script && (string(g.Script) != cmd || strings.Join(g.Argv, " ") != "bash -c "+BashScript):
			t.Fatalf("a command of %d bytes: argv %.60q, script of %d bytes", n, g.Argv, len(g.Script))
		case !script && (len(g.Script) != 0 || len(g.Argv) != 3 || g.Argv[2] != cmd):
			t.Fatalf("a command of %d bytes: argv %.60q, script of %d bytes", n, g.Argv, len(g.Script))
		}
	}
}

// A command longer than any MCP request is refused in one plain sentence
// naming the limit; nothing runs.
func TestCommandOverTheLimitIsRefused(t *testing.T) {
	stub := &stubSub{}
	e := &Executor{Cfg: testConfig(), Sub: stub, Argv: bashArgv, ScriptArgv: BashScriptArgv}
	_, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: strings.Repeat("x", MaxCommand+1)})
	want := fmt.Sprintf("The command is %d bytes, over the 16777216 bytes (16 MiB) a command may be.", MaxCommand+1)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) || stub.got != nil {
		t.Fatalf("a command over the limit: %v (ran: %v)", err, stub.got != nil)
	}
}
