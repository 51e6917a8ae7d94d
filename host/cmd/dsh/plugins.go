package main

import (
	"bytes"
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

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/pluginproc"
)

// plugins starts every dsh-* binary on the plugin path (first one of each
// name wins, as in a composition) and prints what it provides, injects,
// registers as tools and takes as config, as text or as JSON lines. A
// binary that would not load (no handshake, another protocol version, a
// failing Describe) is listed with why, and makes the exit status 1. Two
// binaries that provide one key are not a failure: a composition picks one.
func plugins(dirs []string, asJSON bool, logger hclog.Logger, stdout, stderr io.Writer) int {
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
	if len(bins) == 0 {
		fmt.Fprintf(stderr, "dsh plugins: no dsh-* binary in %s\n", strings.Join(dirs, ":"))
		return exitOK
	}
	code := exitOK
	failed := 0
	enc := json.NewEncoder(stdout)
	for i, bin := range bins {
		d, err := describeBinary(bin, logger)
		if err != nil {
			code = exitFailure
			failed++
		}
		if asJSON {
			line := map[string]any{"binary": bin}
			if err != nil {
				line["error"] = err.Error()
			} else if dj, merr := protojson.Marshal(d); merr == nil {
				line["description"] = json.RawMessage(dj)
			}
			_ = enc.Encode(line)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writePlugin(stdout, bin, d, err)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "dsh plugins: %d of %d binaries would not load\n", failed, len(bins))
	}
	return code
}

// describeBinary starts bin as a composition would, reads its description
// and stops it.
func describeBinary(bin string, logger hclog.Logger) (*lifecycle.Description, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	id := strings.TrimPrefix(filepath.Base(bin), "dsh-")
	p, err := pluginproc.Start(ctx, pluginproc.Config{
		ID:     id,
		Binary: bin,
		Env:    host.PluginEnv(os.LookupEnv, id),
		Logger: logger.Named(filepath.Base(bin)),
	})
	if err != nil {
		return nil, err
	}
	d := p.Description()
	_ = p.Stop(ctx)
	return d, nil
}

// writePlugin prints one binary as a few indented lines.
func writePlugin(w io.Writer, bin string, d *lifecycle.Description, err error) {
	if err != nil {
		fmt.Fprintf(w, "%s  %s\n  would not load: %v\n", strings.TrimPrefix(filepath.Base(bin), "dsh-"), bin, err)
		return
	}
	fmt.Fprintf(w, "%s %s  %s\n", d.Name, d.Version, bin)
	if d.Summary != "" {
		fmt.Fprintf(w, "  %s\n", d.Summary)
	}
	var provides []string
	for _, p := range d.Provides {
		s := "ctx." + p.Key
		if len(p.GrpcServices) > 0 {
			s += " (" + strings.Join(p.GrpcServices, ", ") + ")"
		}
		provides = append(provides, s)
	}
	if len(provides) > 0 {
		fmt.Fprintf(w, "  provides: %s\n", strings.Join(provides, ", "))
	}
	var injects []string
	for _, in := range d.Inject {
		s := "ctx." + in.Key
		if in.Optional {
			s += " (optional)"
		}
		injects = append(injects, s)
	}
	if len(injects) > 0 {
		fmt.Fprintf(w, "  injects: %s\n", strings.Join(injects, ", "))
	}
	if len(d.Tools) > 0 || len(d.ToolsFromConfig) > 0 {
		tools := strings.Join(d.Tools, ", ")
		if len(d.ToolsFromConfig) > 0 {
			if tools != "" {
				tools += "; "
			}
			tools += "named by config: " + strings.Join(d.ToolsFromConfig, ", ")
		}
		fmt.Fprintf(w, "  tools: %s\n", tools)
	}
	fmt.Fprintf(w, "  config: %s\n", configSummary(d.ConfigSchema))
	if d.SettingsNamespace != "" {
		fmt.Fprintf(w, "  settings: %s (merged under config)\n", d.SettingsNamespace)
	}
}

// configSummary names the top-level properties of a config schema and
// their types; --json gives the whole schema.
func configSummary(schema string) string {
	if strings.TrimSpace(schema) == "" {
		return "any (no schema)"
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil || len(s.Properties) == 0 {
		var b bytes.Buffer
		if json.Compact(&b, []byte(schema)) != nil {
			return schema
		}
		return b.String()
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		part := n
		switch t := s.Properties[n].Type.(type) {
		case string:
			part += " " + t
		case []any:
			var ts []string
			for _, x := range t {
				ts = append(ts, fmt.Sprint(x))
			}
			part += " " + strings.Join(ts, "|")
		}
		if required[n] {
			part += " (required)"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
