// Package testneeds names the programs the tests drive that Go does not
// bring (and the Python modules of a plugin written in Python), and the
// Debian package that brings each. A test that cannot run
// without one skips with a reason that says what to install; make test
// lists the missing ones before it starts, and .ci/run installs them.
package testneeds

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// packages maps each program to its Debian package. A program a test looks
// for belongs here, so that its skip names the package and CI installs it.
var packages = map[string]string{
	"bwrap":    "bubblewrap", // the sandbox's bubblewrap runner
	"chromium": "chromium",   // the console's browser tests (playwright-core drives it)
	"gcc":      "gcc",        // cgo, which the race detector needs
	"curl":     "curl",       // the network proxy: a real HTTP and SOCKS5 client
	"git":      "git",
	"less":     "less", // terminals: a pager
	"node":     "nodejs",
	"npm":      "npm", // installs the TypeScript SDK client in test/mcp-node and playwright-core in test/console
	"nsenter":  "util-linux",
	"python3":  "python3", // terminals: a REPL; hooks and probes are Python scripts
	"strace":   "strace",
	"top":      "procps", // terminals: a full-screen program
	"unshare":  "util-linux",
	"vim":      "vim", // terminals: an editor
}

// aliases are other names a program goes by elsewhere (Ubuntu's
// chromium-browser is Debian's chromium): any of them counts as installed.
var aliases = map[string][]string{
	"chromium": {"chromium-browser"},
}

// lookPath finds program name, or one of its aliases, on PATH.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	for _, a := range aliases[name] {
		if err == nil {
			break
		}
		var aerr error
		if p, aerr = exec.LookPath(a); aerr == nil {
			err = nil
		}
	}
	return p, err
}

// pythonModules maps each Python module a test's plugin imports to its
// Debian package. Debian installs them for /usr/bin/python3, which may not
// be the python3 on PATH: a module counts as there when either imports it.
var pythonModules = map[string]string{
	"cryptography":    "python3-cryptography",
	"google.protobuf": "python3-protobuf",
	"grpc":            "python3-grpcio",
}

// pythons are the interpreters a module is looked for in, in order.
var pythons = []string{"python3", "/usr/bin/python3"}

// pythonWith returns the first interpreter that imports every module, or "".
func pythonWith(modules ...string) string {
	for _, py := range pythons {
		if exec.Command(py, "-c", "import "+strings.Join(modules, ", ")).Run() == nil {
			return py
		}
	}
	return ""
}

// Python returns a python3 that imports every module (each a key of
// pythonModules), or skips t with a reason that names the packages to
// install.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	if py := pythonWith(modules...); py != "" {
		return py
	}
	var pkgs []string
	for _, m := range modules {
		pkgs = append(pkgs, pythonModules[m])
	}
	t.Skipf("no python3 here imports %s (apt-get install %s)", strings.Join(modules, ", "), strings.Join(pkgs, " "))
	return ""
}

// elsewhere maps each program no Debian archive brings to how it is
// installed: its tests skip without it, and CI does not install it.
var elsewhere = map[string]string{
	"pwsh": "PowerShell 7: the powershell package of packages.microsoft.com, see https://learn.microsoft.com/powershell/scripting/install/install-debian", // the PowerShell terminals and the persistent pwsh tool
}

// Install is the command that installs the package bringing program name,
// or how a program no Debian archive brings is installed.
func Install(name string) string {
	if how, ok := elsewhere[name]; ok {
		return how
	}
	pkg, ok := packages[name]
	if !ok {
		pkg = name
	}
	return "apt-get install " + pkg
}

// Command returns the path of program name, or skips t with a reason that
// names the package to install.
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := lookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (%s)", name, Install(name))
	}
	return p
}

// Chromium returns the path of the chromium the console's browser tests
// drive (Debian's /usr/bin/chromium, or chromium-browser). Without one it
// skips t naming the package (make test lists it among what skipped), or
// fails t under DSH_BROWSER_TESTS=1 (set by .ci/run, which installs
// chromium), where a browser test that cannot run must not pass as
// skipped.
func Chromium(t testing.TB) string {
	t.Helper()
	p, err := lookPath("chromium")
	if err != nil {
		msg := fmt.Sprintf("chromium is not installed (%s)", Install("chromium"))
		if os.Getenv("DSH_BROWSER_TESTS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// Missing returns the programs not on PATH (and the Python modules no
// python3 imports) and the packages that bring them, each sorted and
// listed once.
func Missing() (programs, pkgs []string) {
	seen := map[string]bool{}
	for name, pkg := range packages {
		if _, err := lookPath(name); err == nil {
			continue
		}
		programs = append(programs, name)
		if !seen[pkg] {
			seen[pkg] = true
			pkgs = append(pkgs, pkg)
		}
	}
	for mod, pkg := range pythonModules {
		if pythonWith(mod) != "" {
			continue
		}
		programs = append(programs, "python3 module "+mod)
		if !seen[pkg] {
			seen[pkg] = true
			pkgs = append(pkgs, pkg)
		}
	}
	sort.Strings(programs)
	sort.Strings(pkgs)
	return programs, pkgs
}

// MissingElsewhere returns the programs Debian does not bring that are not
// on PATH, sorted, each with how to install it.
func MissingElsewhere() []string {
	var out []string
	for name, how := range elsewhere {
		if _, err := exec.LookPath(name); err != nil {
			out = append(out, name+" ("+how+")")
		}
	}
	sort.Strings(out)
	return out
}
