package localexec

import "os"

// writeScript writes command to a new file in the temporary folder, which
// only this user may read (Executor.ScriptFile), and gives its path.
func writeScript(command string) (string, error) {
	f, err := os.CreateTemp("", "dsh-command-*")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(command)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// removeScript removes a script file the command has not removed; one
// that cannot be removed is left to the temporary folder's own cleanup.
func removeScript(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}
