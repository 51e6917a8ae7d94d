package kubeexec

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MarkerVar is the variable that marks every process of one command in
// the container: the command starts with MarkerVar=<its id> in its
// environment, its children inherit it (setsid ones too), and ending the
// command is killing each process whose /proc/PID/environ holds it. It
// needs only a POSIX shell, tr and kill (head and grep make the scan one
// pass where installed): no process groups, no pid files,
// nothing of the command's own cooperation (a process that empties its
// environment escapes).
const MarkerVar = "DSH_EXEC_ID"

// NewID is a fresh command id for MarkerVar.
func NewID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Ack is the byte the wrapper writes first on stdout, once it has read the
// header: the caller drops it, and sends the command's input only then
// (a head -c that reads ahead, as busybox's does, cannot take the input
// with the header).
const Ack = '.'

// procDirs and environs are /proc's process directories (and their
// environ files) as globs that list them in the order of their pids, one
// digit, then two, and so on, not a glob's order by name (10 before 9).
// So TERM reaches a shell before the child it waits for, where pids have
// not wrapped: a shell whose last command dies of TERM first could exit
// before its TERM trap runs.
const (
	procDirs = "/proc/[0-9] /proc/[1-9][0-9] /proc/[1-9][0-9][0-9] /proc/[1-9][0-9][0-9][0-9] /proc/[1-9][0-9][0-9][0-9][0-9] /proc/[1-9][0-9][0-9][0-9][0-9][0-9] /proc/[1-9][0-9][0-9][0-9][0-9][0-9][0-9]"
	environs = "/proc/[0-9]/environ /proc/[1-9][0-9]/environ /proc/[1-9][0-9][0-9]/environ /proc/[1-9][0-9][0-9][0-9]/environ /proc/[1-9][0-9][0-9][0-9][0-9]/environ /proc/[1-9][0-9][0-9][0-9][0-9][0-9]/environ /proc/[1-9][0-9][0-9][0-9][0-9][0-9][0-9]/environ"
)

// endFunctions are the shell functions that find and end one command's
// processes: marked prints their pids (a zombie's environ is empty, so a
// dead process is never found again); end sends TERM, waits up to $1
// tenths of a second for them to go, then sends KILL until none is left.
// Where grep is installed, marked reads every environ through one head,
// tr and grep (head names each file before its bytes), so a scan costs
// the same few processes however many the container runs; else it reads
// them one tr each.
const endFunctions = `marked() {
	if command -v grep >/dev/null 2>&1; then
		p=
		head -c 67108864 /dev/null ` + environs + ` 2>/dev/null | tr '\0' '\n' |
			grep -e '^==> /proc/[0-9]*/environ <==$' -e "^` + MarkerVar + `=$id\$" | while IFS= read -r l; do
				case $l in
				"==> "*) p=${l#"==> /proc/"}; p=${p%/environ*} ;;
				*) [ -z "$p" ] || printf '%s\n' "$p" ;;
				esac
			done
		return
	fi
	for p in ` + procDirs + `; do
		e=$({ tr '\0' '\n' <"$p/environ"; } 2>/dev/null) || continue
		case "
$e
" in *"
` + MarkerVar + `=$id
"*) printf '%s\n' "${p#/proc/}" ;; esac
	done
}
end() {
	k=$(marked)
	[ -n "$k" ] || return 0
	kill -TERM $k 2>/dev/null
	i=0
	while [ "$i" -lt "$1" ]; do
		sleep 0.1 2>/dev/null || sleep 1
		k=$(marked)
		[ -n "$k" ] || return 0
		i=$((i + 1))
	done
	i=0
	while [ "$i" -lt 50 ]; do
		k=$(marked)
		[ -n "$k" ] || return 0
		kill -KILL $k 2>/dev/null
		sleep 0.1 2>/dev/null || sleep 1
		i=$((i + 1))
	done
}
`

// Wrapper is the in-pod script (sh -c Wrapper dsh ID HEADERLEN INPUTLEN
// GRACE) that runs one command. Its stdin is, in order: the header
// (Header: the directory, the command and its environment), the command's
// input (INPUTLEN bytes, sent after Ack), then nothing until the caller
// is done or gone. When that stream ends before the command does (the
// caller was told to stop it, or died and its connection with it), the
// watcher ends the command's tree: TERM, GRACE tenths of a second, KILL.
// That is the dead-man switch: a caller killed outright leaves nothing
// running, as long as the API server and kubelet close the exec's stdin
// when its connection goes, which they do. What the command leaves
// behind when it exits dies with it, as on the host. The exit status is
// the command's; 125 is a header that did not arrive whole.
var Wrapper = endFunctions + "w=" + Quote(watcher) + `
id=$1 hl=$2 n=$3 g=$4
h=$(head -c "$hl") && eval "$h" && [ "$ok" = 1 ] || { echo "The command did not arrive whole in the container." >&2; exit 125; }
printf .
exec 3<&0
{
	if [ "$n" -gt 0 ]; then head -c "$n" <&3; fi
	if command -v setsid >/dev/null 2>&1; then
		setsid sh -c "$w" dsh-watch "$id" "$g" <&3 >/dev/null 2>&1 &
	else
		sh -c "$w" dsh-watch "$id" "$g" <&3 >/dev/null 2>&1 &
	fi
} | (
	if [ -n "$d" ]; then
		case $d in "~" | "~/"*) d=$HOME${d#"~"} ;; esac
		# ./ keeps a directory such as -P or - from reading as an option.
		case $d in /*) e=$d ;; *) e=./$d ;; esac
		cd "$e" 2>/dev/null || { printf 'The working directory %s does not exist in the container or cannot be entered.\n' "$d" >&2; exit 1; }
	fi
	if command -v bash >/dev/null 2>&1; then s=bash; else s=sh; fi
	exec 3<&-
	if [ -n "$big" ] && ! env "$@" true 2>/dev/null; then
		echo "The command's environment is too large for a program in the container to start with (Linux takes at most 128 KiB in one variable, and about 2 MiB in all)." >&2
		exit 126
	fi
	if [ -z "$long" ]; then
		exec env "` + MarkerVar + `=$id" "$@" "$s" -c "$c"
	fi
	exec 5<&0
	printf '%s\n' "$c" | {
		exec 4<&0 <&5 5<&-
		exec env "` + MarkerVar + `=$id" "$@" "$s" -c 'eval "$(cat <&4)" 4<&-' "$s"
	}
)
st=$?
exec 3<&-
end 0
exit "$st"
`

// watcher is the dead-man switch on its own (sh -c watcher dsh-watch
// ID GRACE): it waits for its stdin to end (or its cat to be killed),
// then ends the command. Where setsid is installed, Wrapper starts it in
// a session of its own, so a runtime that kills the exec's process group
// when the connection goes does not take the watcher with it.
const watcher = endFunctions + `id=$1
cat >/dev/null
end "$2"
`

// KillScript (sh -c KillScript dsh ID GRACE) ends one command's tree from
// a second exec. Where the command's watcher runs, it only ends the
// watcher's cat, so the watcher alone sends TERM (a TERM trap runs once,
// however the stop reached the pod); otherwise it ends the tree itself:
// TERM, GRACE tenths of a second, KILL.
const KillScript = endFunctions + `id=$1
w=
for p in /proc/[0-9]*; do
	a=$({ tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null) || continue
	case "$a" in *"
dsh-watch
$id
"*) w="$w ${p#/proc/}" ;; esac
done
[ -n "$w" ] || { end "$2"; exit 0; }
for p in /proc/[0-9]*; do
	s=$({ cat "$p/stat"; } 2>/dev/null) || continue
	for q in $w; do
		case "$s" in *" (cat) "?" $q "*) kill -TERM "${p#/proc/}" 2>/dev/null ;; esac
	done
done
`

// WrapperArgv is the exec command of Wrapper for the command with id,
// header and input lengths, and a grace in milliseconds.
func WrapperArgv(id string, header, input int, graceMs int64) []string {
	return []string{"sh", "-c", Wrapper, "dsh", id, strconv.Itoa(header), strconv.Itoa(input), strconv.FormatInt(tenths(graceMs), 10)}
}

// watcherExec runs the watcher as an exec of its own (sh -c watcherExec
// dsh ID GRACE), in a session of its own where setsid is installed: the
// dead-man switch of a session whose own exec has no input to spare for
// it (a terminal's, whose input is the shell's).
var watcherExec = "w=" + Quote(watcher) + `
exec 3<&0
if command -v setsid >/dev/null 2>&1; then
	setsid sh -c "$w" dsh-watch "$1" "$2" <&3 >/dev/null 2>&1 &
else
	sh -c "$w" dsh-watch "$1" "$2" <&3 >/dev/null 2>&1 &
fi
exec 3<&-
wait
`

// WatcherArgv is the exec command of a watcher on its own: once the
// exec's input ends (its caller is done or gone), it ends the processes
// marked with id: TERM, the grace, KILL. KillScript ends it as it ends a
// command's watcher.
func WatcherArgv(id string, graceMs int64) []string {
	return []string{"sh", "-c", watcherExec, "dsh", id, strconv.FormatInt(tenths(graceMs), 10)}
}

// KillArgv is the exec command of KillScript.
func KillArgv(id string, graceMs int64) []string {
	return []string{"sh", "-c", KillScript, "dsh", id, strconv.FormatInt(tenths(graceMs), 10)}
}

func tenths(ms int64) int64 { return max(ms+99, 0) / 100 }

// Header is the text Wrapper reads first: the working directory ("" is
// the container's), the command, and its environment, all quoted for the
// shell. Variables whose names env cannot take are left out. A command
// longer than ArgvMax is marked long: the shell reads it on a descriptor,
// since Linux takes at most 128 KiB in one argument. An environment near
// Linux's limits is marked big: the wrapper tries it before the command,
// so a refusal is a sentence.
func Header(dir, command string, env map[string]string) string {
	var b strings.Builder
	b.WriteString("d=" + Quote(dir) + "\nc=" + Quote(command) + "\nset --")
	size := 0
	if len(command) <= ArgvMax {
		size = len(command)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || k[0] == '-' || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(env[k], 0) || k == MarkerVar {
			continue
		}
		b.WriteString(" " + Quote(k+"="+env[k]))
		size += len(k) + len(env[k]) + 2
		if len(k)+len(env[k])+2 > ArgMax {
			size += bigEnv
		}
	}
	if len(command) > ArgvMax {
		b.WriteString("\nlong=1")
	}
	if size > bigEnv {
		b.WriteString("\nbig=1")
	}
	b.WriteString("\nok=1\n")
	return b.String()
}

// ArgvMax is the longest command the wrapper passes to the shell as an
// argument; a longer one it reads on a descriptor. ArgMax is the most
// Linux takes in one argument or variable (with its NUL).
const (
	ArgvMax = 64 << 10
	ArgMax  = 128 << 10
	bigEnv  = 1 << 20 // past this the environment is tried first
)

// Quote is s as one shell word in single quotes.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
