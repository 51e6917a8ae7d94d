package main

import (
	"regexp"
	"sort"
	"strings"

	"github.com/dshrun/dsh/plugins/lib/kubeexec"
)

// The shells a session may run in the container (config.Shell).
const (
	shellBash = "bash"
	shellSh   = "sh"
)

// Prompt is a session's prompt: the text the shell is given as PS1 and the
// bytes it prints for it, the mark of terminal-bash's prompt (an OSC 133
// prompt mark naming the session's nonce, which terminals do not show),
// then "$ ". bash is given it with its non-printing brackets; a POSIX sh,
// which knows no escapes in PS1, the bytes themselves.
func Prompt(shell, nonce string) (ps1 string, printed []byte) {
	mark := "\x1b]133;A;dsh=" + nonce + "\a"
	if shell == shellSh {
		return mark + "$ ", []byte(mark + "$ ")
	}
	return `\[\e]133;A;dsh=` + nonce + `\a\]$ `, []byte(mark + "$ ")
}

// RC is the text the interactive shell reads first: the trusted facts as
// exported variables, the prompt (for bash, PROMPT_COMMAND sets it again
// before every prompt, so a command that changes PS1 does not blind the
// registry; a POSIX sh has no such hook), no history file, and fd 3, which
// brought the text, closed.
func RC(shell, ps1 string, facts map[string]string) string {
	var b strings.Builder
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !shellName.MatchString(k) {
			// Not a variable a shell can hold (and text the rc would run).
			continue
		}
		b.WriteString("export " + k + "=" + kubeexec.Quote(facts[k]) + "\n")
	}
	b.WriteString("PS1=" + kubeexec.Quote(ps1) + "\n")
	if shell == shellBash {
		b.WriteString("PROMPT_COMMAND=" + kubeexec.Quote("PS1="+kubeexec.Quote(ps1)) + "\n")
	} else {
		b.WriteString("unset ENV\n")
	}
	b.WriteString("HISTFILE=\nexec 3<&-\n")
	return b.String()
}

// Command is the argv the container runs for a session: a POSIX sh that
// sets TERM, goes to dir (when one is named), and becomes the interactive
// shell with the rc text on fd 3 (a here-document: a pipe or a file the
// shell deletes): bash reads it as its rc file and no other; a POSIX sh
// reads the file $ENV names, which the rc then drops. An exec carries no
// environment of its own, so this is the one way in. The rc text (and
// with it the prompt's nonce) is on the command line of the sh alone, for
// the moment before it becomes the shell: the interactive shell and its
// children find it in neither their environment nor their command line.
//
// id, when set, marks every process of the session in the container
// (kubeexec.MarkerVar), so that the relay can end them all when the
// session ends: a container runtime leaves an exec's processes running
// when its client goes.
func Command(shell, term, dir, rc, nonce, id string) []string {
	end := "__DSH_RC_" + nonce + "__"
	var b strings.Builder
	b.WriteString("export TERM=" + kubeexec.Quote(term) + "\n")
	if id != "" {
		b.WriteString("export " + kubeexec.MarkerVar + "=" + kubeexec.Quote(id) + "\n")
	}
	if dir != "" {
		b.WriteString("cd -- " + kubeexec.Quote(dir) + " || exit 1\n")
	}
	if shell == shellSh {
		b.WriteString("export ENV=/dev/fd/3\nexec sh -i 3<<'" + end + "'\n")
	} else {
		b.WriteString("exec bash --noprofile --rcfile /dev/fd/3 -i 3<<'" + end + "'\n")
	}
	b.WriteString(rc + end + "\n")
	return []string{"sh", "-c", b.String()}
}

// shellName is a name a POSIX shell variable may have.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
