# dsh: build, test, run and measure. See README.md.
GO        ?= go
BIN       := bin
PLUGINS   := $(notdir $(patsubst %/main.go,%,$(wildcard plugins/*/main.go)))
# The Python example's go-plugin protos are compiled for Python alone (its own Makefile).
PROTOS    := $(shell find . -name '*.proto' -not -path './bin/*' -not -path './examples/python-executor/proto/*')
COMPOSITION ?= compositions/default.yaml

PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
TOOLS := $(CURDIR)/.tools

.PHONY: all build test cross run bench reliability proto console lint clean

all: build

# Without the symbol table and DWARF (panics still print their stacks): a
# third smaller on disk, and what each process maps.
BUILDFLAGS ?= -trimpath -ldflags=-s\ -w
# Statically linked, without libc and the dynamic loader: 1.5-2 MiB less
# RSS a process at rest. Nothing needs cgo (user names come from
# /etc/passwd, names resolve with Go's resolver). Only build sets it: -race
# (make test) needs cgo.
BUILDCGO ?= 0

build:
	CGO_ENABLED=$(BUILDCGO) $(GO) build $(BUILDFLAGS) -o $(BIN)/dsh ./host/cmd/dsh
	CGO_ENABLED=$(BUILDCGO) $(GO) build $(BUILDFLAGS) -o $(BIN)/dsh_watchdog ./host/cmd/dsh_watchdog
	@for p in $(PLUGINS); do echo "CGO_ENABLED=$(BUILDCGO) $(GO) build $(BUILDFLAGS) -o $(BIN)/dsh-$$p ./plugins/$$p"; CGO_ENABLED=$(BUILDCGO) $(GO) build $(BUILDFLAGS) -o $(BIN)/dsh-$$p ./plugins/$$p || exit 1; done
	@if command -v python3 >/dev/null; then $(MAKE) --no-print-directory -C examples/python-executor; else echo "no python3: examples/python-executor not built"; fi

# go test -race over PKGS with TESTFLAGS added, through internal/testrun:
# it installs the TypeScript SDK client and playwright-core (npm ci in
# test/mcp-node and test/console), stops
# naming the package when -race has no C compiler, and ends with every
# skipped test and why. make test TESTFLAGS='-count=1 -run TestX' PKGS=./host/...
TESTFLAGS ?=
PKGS      ?= ./...
test:
	GO='$(GO)' $(GO) run ./internal/testrun $(TESTFLAGS) $(PKGS)

# The module must build and vet on the other systems dsh targets too: the
# Linux-only process mechanics sit behind per-OS files.
CROSS := windows/amd64 windows/arm64 darwin/amd64 darwin/arm64
cross:
	@for t in $(CROSS); do \
	  echo "$$t: $(GO) build ./... && $(GO) vet ./..."; \
	  (export GOOS=$${t%/*} GOARCH=$${t#*/}; $(GO) build ./... && $(GO) vet ./...) || exit 1; \
	done

# The fault suite alone (make test runs it too), with one line per fault:
# what was injected, what was seen, and whether the guarantee held.
reliability:
	@rm -f $(BIN)/reliability.txt; mkdir -p $(BIN)
	@DSH_RELIABILITY_REPORT=$(CURDIR)/$(BIN)/reliability.txt $(GO) test -race -count=1 ./test/reliability/; rc=$$?; \
	  echo; echo "fault suite:"; sort -k2 $(BIN)/reliability.txt 2>/dev/null | sed 's/^/  /'; exit $$rc

run: build
	$(BIN)/dsh serve $(COMPOSITION)

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 200x ./registry/ ./host/procs/retention/ ./host/confine/
	$(GO) run ./bench

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# Regenerates the committed Go code of every .proto next to it.
proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler"; exit 1; }
	PATH=$(TOOLS):$$PATH protoc -I . --go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. $(PROTOS)

# Rebuilds the console's page (host/console/dist, committed and embedded in
# dsh) from host/console/web with the pinned esbuild and xterm.js.
console:
	@command -v npm >/dev/null || { echo "npm missing: apt-get install npm"; exit 1; }
	cd host/console/web && npm ci && npm run build

lint:
	@test -z "$$(gofmt -l . | grep -v '^.tools/')" || { gofmt -l . ; exit 1; }
	$(GO) vet ./...

clean:
	rm -rf $(BIN) $(TOOLS)
