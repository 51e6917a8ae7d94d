package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/pluginproc"
)

// plugins starts every dsh-* binary on the plugin path (first one of each
// name wins, as in a composition) and prints its description as JSON lines.
func plugins(dirs []string, logger hclog.Logger, stdout, stderr io.Writer) int {
	seen := map[string]bool{}
	var bins []string
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, "dsh-*"))
		sort.Strings(matches)
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || seen[filepath.Base(m)] {
				continue
			}
			seen[filepath.Base(m)] = true
			bins = append(bins, m)
		}
	}
	code := exitOK
	enc := json.NewEncoder(stdout)
	for _, bin := range bins {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		p, err := pluginproc.Start(ctx, pluginproc.Config{
			ID:     strings.TrimPrefix(filepath.Base(bin), "dsh-"),
			Binary: bin,
			Env:    host.PluginEnv(os.LookupEnv, strings.TrimPrefix(filepath.Base(bin), "dsh-")),
			Logger: logger.Named(filepath.Base(bin)),
		})
		if err != nil {
			fmt.Fprintf(stderr, "dsh plugins: %v\n", err)
			code = exitFailure
			cancel()
			continue
		}
		d := p.Description()
		_ = p.Stop(ctx)
		cancel()
		dj, err := protojson.Marshal(d)
		if err != nil {
			fmt.Fprintf(stderr, "dsh plugins: %s: %v\n", bin, err)
			code = exitFailure
			continue
		}
		_ = enc.Encode(map[string]any{"binary": bin, "description": json.RawMessage(dj)})
	}
	if len(bins) == 0 {
		fmt.Fprintf(stderr, "dsh plugins: no dsh-* binary in %s\n", strings.Join(dirs, ":"))
	}
	return code
}
