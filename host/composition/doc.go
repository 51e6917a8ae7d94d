// Package composition reads and checks dsh compositions: the YAML files that
// list the plugins a host starts.
//
// It owns the static side of a composition: reading the file (through koanf,
// with a yaml.Node pass alongside for line numbers), interpolating environment
// variables, checking everything that can be checked without running a plugin
// (keys, types, names, ids, durations, sha256 pins), finding each entry's
// binary on disk, validating an entry's config against a JSON Schema it is
// handed, and printing the resolved composition with secrets masked. Every
// problem carries the file, line and column of the value at fault (a config
// value too, where settings or the entry has it), and a file's problems are
// reported all together.
//
// It does not start processes and does not check the dependency graph between
// plugins (who provides or injects what, cycles, settings namespaces read by a
// plugin): those need the plugins' own descriptions and live in the host.
//
// # Format
//
//	host:                     # optional
//	  startTimeout: 10s       # bound on a plugin's handshake (default 10s)
//	  stopTimeout: 5s         # bound on each plugin stop (default 5s)
//	settings:                 # optional: namespace -> map, read by plugins
//	  shell:
//	    timeoutMs: 120000
//	plugins:                  # required, may be empty
//	  - id: env               # optional, defaults to the short name
//	    name: shell-env       # either name ...
//	    config: {...}         # optional map handed to the plugin
//	    disabled: false       # optional
//	  - id: probe
//	    path: ./bin/dsh-probe # ... or path, relative to the file's directory
//	    sha256: "<64 hex>"    # optional pin of the binary ("" means none)
//
// A name may be written shell-env, dsh-shell-env or @scope/dsh-shell-env; all
// three mean the plugin whose short name is shell-env and whose binary is
// dsh-shell-env. An entry's id defaults to its short name, or, for a path
// entry, to the file's base name without a leading "dsh-" (and without
// ".exe").
//
// # Interpolation
//
// Every string scalar that is a value (not a key) may refer to the
// environment: ${VAR} (an error if VAR is unset), ${VAR:-default} (default
// when VAR is unset or empty), ${VAR:?message} (an error carrying message
// when VAR is unset or empty) and $$ for a literal $. A $ followed by neither
// { nor $ is kept as is. The default and message are taken literally, up to
// the first }. Interpolation works on the parsed YAML tree, so a value can
// never inject YAML, and an interpolated value is always a string, even when
// it reads like a number or a boolean ("${N:-3}" is the string "3").
// Inside a flow collection ([...] or {...}) a reference must be quoted, as
// braces end a plain scalar there: {token: "${TOKEN}"}. Values that came
// from a variable whose name looks secret are masked by [Composition.Masked].
//
// Map keys are strings as written (1, true and null keys stay "1", "true"
// and "null"), and timestamps stay the strings they are: configs travel to
// plugins as JSON.
package composition
