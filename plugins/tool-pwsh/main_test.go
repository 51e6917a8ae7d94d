package main

import (
	"testing"

	"github.com/dshrun/dsh/plugins/lib/shelltool/shelltooltest"
)

// What the model reads of the PowerShell tool, under each kind of
// executor: the description is written for PowerShell, longer than bash's
// by its idioms and quoting rules.
func TestToolSpecsGolden(t *testing.T) { shelltooltest.CheckSpecs(t, pwsh, 1700) }
