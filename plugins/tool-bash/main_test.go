package main

import (
	"testing"

	"github.com/dshrun/dsh/plugins/lib/shelltool/shelltooltest"
)

// What the model reads of the bash tool, under each kind of executor.
func TestToolSpecsGolden(t *testing.T) { shelltooltest.CheckSpecs(t, bash, 1200) }
