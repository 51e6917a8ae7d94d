package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
)

func validate(comp *composition.Composition, opts host.Options, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ds, err := host.Validate(ctx, comp, opts)
	if err != nil {
		fmt.Fprintf(stderr, "dsh validate: %v\n", err)
		return exitBadUse
	}
	fmt.Fprintf(stderr, "dsh validate: %s is valid (%d plugins)\n", composition.Pos{File: comp.File}, len(ds))
	for _, d := range ds {
		if d.Disabled {
			fmt.Fprintf(stderr, "  %s: disabled\n", d.ID)
			continue
		}
		fmt.Fprintf(stderr, "  %s: %s %s (%s)%s\n", d.ID, d.Description.Name, d.Description.Version, d.Binary, describeKeys(d.Description))
	}
	return exitOK
}

func describeKeys(d *lifecycle.Description) string {
	var parts []string
	for _, p := range d.Provides {
		parts = append(parts, "provides "+p.Key)
	}
	for _, in := range d.Inject {
		s := "injects " + in.Key
		if in.Optional {
			s += "?"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
