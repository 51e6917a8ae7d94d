// Package passes passes.
package passes

import "testing"

func TestOne(t *testing.T) {}
