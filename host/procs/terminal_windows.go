package procs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Terminals need a pseudo-console and a tree to kill: neither is here yet
// (SpawnTerminal fails before this, as Spawn does, for want of the tree).
var errNoTerminals = fmt.Errorf("terminals are not supported on windows yet: %w", errors.ErrUnsupported)

func openTerminal(int, int) (*os.File, *os.File, error) { return nil, nil, errNoTerminals }
func controllingTerminal(*syscall.SysProcAttr)          {}
func setTerminalSize(*os.File, int, int) error          { return errNoTerminals }
func foregroundGroup(*os.File) (int, error)             { return 0, errNoTerminals }
func signalProcess(int, syscall.Signal) error           { return errNoTerminals }

var terminalSignals = map[string]syscall.Signal{}
