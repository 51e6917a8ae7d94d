package procs

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"unicode/utf16"
)

// How Windows finds a program and hands it its environment, the parts
// that are plain Go (tested on every system): environment names match
// without case, a program name is tried with each extension PATHEXT lists,
// and CreateProcess takes the environment as one UTF-16 block.

// onWindows is a constant, so what it guards costs nothing elsewhere.
const onWindows = runtime.GOOS == "windows"

// errNoScript is why a spec with a script fails on Windows: os/exec
// passes a child no descriptor past its standard three there.
var errNoScript = fmt.Errorf("a script on descriptor %d is not supported on windows: %w", ScriptFD, errors.ErrUnsupported)

// envName is the name of "name=value". A leading '=' belongs to the name:
// Windows keeps each drive's working directory as "=C:=C:\dir".
func envName(kv string) string {
	from := min(1, len(kv))
	if i := strings.IndexByte(kv[from:], '='); i >= 0 {
		return kv[:from+i]
	}
	return kv
}

// foldEnv is Manager.Env where names match without case: an ambient
// variable the explicit layer names, in any case, gives way to it ("Path"
// to an explicit "PATH"), and the explicit layer follows, sorted by name.
func foldEnv(ambient []string, explicit map[string]string) []string {
	out := make([]string, 0, len(ambient)+len(explicit))
	names := make([]string, 0, len(explicit))
	upper := make(map[string]bool, len(explicit))
	for k := range explicit {
		names = append(names, k)
		upper[strings.ToUpper(k)] = true
	}
	slices.Sort(names)
	for _, kv := range ambient {
		if !upper[strings.ToUpper(envName(kv))] {
			out = append(out, kv)
		}
	}
	for _, k := range names {
		out = append(out, k+"="+explicit[k])
	}
	return out
}

// foldedValue is the value of name in env, matched without case, the
// last one winning ("" when there is none).
func foldedValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && strings.EqualFold(kv[:len(name)], name) {
			v = kv[len(name)+1:]
		}
	}
	return v
}

// lastFold is env with each name once, matched without case: the last
// value wins, in the place of the name's last entry (as os/exec does on
// Windows).
func lastFold(env []string) []string {
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		n := strings.ToUpper(envName(env[i]))
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, env[i])
	}
	slices.Reverse(out)
	return out
}

// envBlock is env as CreateProcess takes it with
// CREATE_UNICODE_ENVIRONMENT: each "name=value" in UTF-16 and NUL-ended,
// then one more NUL. Names are made unique as os/exec makes them, and
// SYSTEMROOT is added from systemRoot when env lacks it (Windows' own
// libraries need it to load), so a terminal's command gets what os/exec
// gives every other command.
func envBlock(env []string, systemRoot string) ([]uint16, error) {
	env = lastFold(env)
	if systemRoot != "" && !slices.ContainsFunc(env, func(kv string) bool {
		return strings.EqualFold(envName(kv), "SYSTEMROOT")
	}) {
		env = append(env, "SYSTEMROOT="+systemRoot)
	}
	var b []uint16
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.New("an environment variable holds a NUL byte")
		}
		if kv == "" {
			continue // its NUL would end the block
		}
		for _, r := range kv {
			b = utf16.AppendRune(b, r)
		}
		b = append(b, 0)
	}
	if len(b) == 0 {
		b = append(b, 0) // an empty block is two NULs
	}
	return append(b, 0), nil
}

// defaultPathExt is what Windows tries when PATHEXT is unset.
const defaultPathExt = ".com;.exe;.bat;.cmd"

// pathExts are PATHEXT's extensions, lower case, each with its dot.
func pathExts(pathext string) []string {
	if pathext == "" {
		pathext = defaultPathExt
	}
	var exts []string
	for e := range strings.SplitSeq(strings.ToLower(pathext), ";") {
		if e == "" {
			continue
		}
		if e[0] != '.' {
			e = "." + e
		}
		exts = append(exts, e)
	}
	return exts
}

// programNames are the names a program name is tried as in each PATH
// directory, in order: itself when it has an extension, then with each of
// PATHEXT's (so "foo.bat.exe" is found for "foo.bat"), as os/exec's
// LookPath does.
func programNames(name, pathext string) []string {
	exts := pathExts(pathext)
	names := make([]string, 0, len(exts)+1)
	if i := strings.LastIndexByte(name, '.'); i >= 0 && strings.LastIndexAny(name, `:\/`) < i {
		names = append(names, name)
	}
	for _, e := range exts {
		names = append(names, name+e)
	}
	return names
}

// hasDir says a program name names a directory too, and is not looked up
// on PATH: a slash anywhere, and on Windows a backslash or a drive's
// colon.
func hasDir(name string) bool {
	if onWindows {
		return strings.ContainsAny(name, `/\:`)
	}
	return strings.Contains(name, "/")
}
