package localexec

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/dshrun/dsh/plugins/lib/pwshargs"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// PwshConfig is a PowerShell executor's config: the keys every executor
// reads, so the one `shell` settings section serves bash and PowerShell
// executors alike, and the program, which belongs in the entry's config
// (a bash executor refuses it in the shared settings).
type PwshConfig struct {
	Config
	// Program is the PowerShell to run: a name looked up on PATH or a
	// path. "" is pwsh (PowerShell 7); on Windows, where pwsh is not
	// installed, Windows PowerShell (powershell.exe).
	Program string `json:"program" desc:"the PowerShell to run: a name on PATH or a path; empty is pwsh (on Windows without pwsh, powershell.exe)"`
}

// PwshEnv are a PowerShell executor's own variables: no telemetry sent
// and no check for a newer version at start (each command is a new pwsh).
var PwshEnv = map[string]string{
	"POWERSHELL_TELEMETRY_OPTOUT": "1",
	"POWERSHELL_UPDATECHECK":      "Off",
}

// PwshInstall is where PowerShell's installation is explained.
const PwshInstall = "https://learn.microsoft.com/powershell/scripting/install/installing-powershell"

// Pwsh is an executor of fresh PowerShell processes: each command is a
// pwsh (or the configured program) given the script pwshargs.Script makes
// of it as -EncodedCommand (pwshargs says why not -Command). A command
// longer than pwshargs.MaxInline reads its text on descriptor 3 where
// there is one, and elsewhere (Windows) from a file the script removes
// once read: stdin is the command's own, and `-Command -`, which reads
// the script from stdin, reads it as typed lines (a statement spanning
// lines needs an empty line after it).
func Pwsh() *Executor {
	p := &pwsh{program: defaultPwsh()}
	e := &Executor{
		Argv:      func(spec *shell.ExecSpec) []string { return pwshargs.Argv(p.program, pwshargs.Script(spec.Command)) },
		InlineMax: pwshargs.MaxInline,
		ExtraEnv:  PwshEnv,
		Missing:   p.missing,
		Own:       &OwnConfig{Schema: sdk.SchemaOf[PwshConfig](), Parse: p.parse},
	}
	if runtime.GOOS == "windows" {
		e.ScriptFile = p.fileArgv
	} else {
		e.ScriptArgv = p.fdArgv
	}
	return e
}

// pwsh is a PowerShell executor's own config.
type pwsh struct {
	program    string
	configured bool // program is the config's, not the default
}

func (p *pwsh) parse(raw json.RawMessage) (Config, func(), error) {
	c, err := sdk.DecodeConfig[PwshConfig](raw)
	if err != nil {
		return Config{}, nil, err
	}
	shared, err := c.Config.complete()
	if err != nil {
		return Config{}, nil, err
	}
	program, configured := c.Program, c.Program != ""
	if !configured {
		program = defaultPwsh()
	}
	return shared, func() { p.program, p.configured = program, configured }, nil
}

// fdArgv is the command line of a long command, which reads the command
// on descriptor 3 (ScriptArgv).
func (p *pwsh) fdArgv(*shell.ExecSpec) []string {
	return pwshargs.Argv(p.program, pwshargs.ScriptFromFD(3))
}

// fileArgv is the command line of a long command written to path
// (ScriptFile).
func (p *pwsh) fileArgv(_ *shell.ExecSpec, path string) []string {
	return pwshargs.Argv(p.program, pwshargs.ScriptFromFile(path))
}

// missing is what the model reads when the program is not installed, ""
// when it is (Executor.Missing).
func (p *pwsh) missing(env map[string]string) string {
	if installed(p.program, env) {
		return ""
	}
	if p.configured {
		return p.program + " is not installed on this machine: it is the PowerShell this executor's config names as program; see " + PwshInstall + " to install PowerShell."
	}
	return "pwsh (PowerShell 7) is not installed on this machine: see " + PwshInstall + " to install it, or set program in this executor's config to the PowerShell to run."
}

// defaultPwsh is the program an empty config runs: pwsh, or on Windows
// without it, Windows PowerShell, which every Windows has.
func defaultPwsh() string {
	if runtime.GOOS != "windows" {
		return "pwsh"
	}
	if _, err := exec.LookPath("pwsh.exe"); err != nil {
		if _, err := exec.LookPath("powershell.exe"); err == nil {
			return "powershell.exe"
		}
	}
	return "pwsh.exe"
}

// installed reports whether program is a path to a program or a name
// found on the command's PATH (env's, else the one the host and this
// plugin share). A relative folder on PATH is the host's to resolve: with
// one, the program may be there.
func installed(program string, env map[string]string) bool {
	if strings.ContainsRune(program, '/') || strings.ContainsRune(program, filepath.Separator) {
		_, err := exec.LookPath(program)
		return err == nil
	}
	path, ok := env["PATH"]
	if !ok {
		path = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			return true
		}
		if _, err := exec.LookPath(filepath.Join(dir, program)); err == nil {
			return true
		}
	}
	return false
}
