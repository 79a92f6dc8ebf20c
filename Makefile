# agent-box — see README.md.
GO      ?= go
BIN     ?= bin/agent-box
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
PREFIX  ?= $(HOME)/.local

.PHONY: build install install-remote test test-plain test-short chaos fuzz fuzz-ci bench bench-quick lint demo e2e ci

# agent-box-supervisor goes beside agent-box, which starts it for every run
# (agent-box alone works too, through "agent-box supervise").
#
# Both are static (no cgo): a dynamically linked Go binary spends time in
# the loader and libc before main (docs/architecture/performance.md,
# "Static binaries"), and every process_start execs the supervisor and
# every SSH connection the server. Nothing here needs libc: the pure-Go
# resolver reads /etc/hosts and DNS, which serves the ready probes'
# localhost URLs. A ready.http host that only an NSS
# module resolves (mDNS, LDAP, sssd) does not resolve in a static build;
# such a probe fails until its timeout: use an address or tcp_port there.
STATIC := CGO_ENABLED=0

# The supervisor is the box side's alone, which is Linux's: on a macOS
# laptop make build and make install build agent-box (connect, install)
# and the builds for boxes, not a supervisor that would not build there.
HOST_OS := $(shell $(GO) env GOOS)
ifeq ($(HOST_OS),linux)
SUPERVISOR := agent-box-supervisor
endif

build:
	$(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/agent-box
	$(if $(SUPERVISOR),$(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(dir $(BIN))agent-box-supervisor ./cmd/agent-box-supervisor)

# install also builds agent-box for the boxes "agent-box install BOX"
# copies it to, in PREFIX/lib/agent-box/OS-ARCH (package install finds
# them there). Cross builds of a static binary need no toolchain but Go's.
BOX_PLATFORMS := linux-amd64 linux-arm64
install:
	$(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(PREFIX)/bin/agent-box ./cmd/agent-box
	$(if $(SUPERVISOR),$(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(PREFIX)/bin/agent-box-supervisor ./cmd/agent-box-supervisor)
	set -e; for p in $(BOX_PLATFORMS); do \
	  GOOS=$${p%-*} GOARCH=$${p#*-} $(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(PREFIX)/lib/agent-box/$$p/ ./cmd/agent-box ./cmd/agent-box-supervisor; \
	done

# install-remote BOX=HOST installs this checkout on a box of any platform
# Go builds for: bin/agent-box asks the box for it (the one mapping of
# uname -sm, package install), the build for it goes in bin/OS-ARCH, and
# agent-box install copies that. INSTALL_FLAGS: more flags for it (-o
# Port=2222, --remote-dir DIR).
install-remote:
	@test -n "$(BOX)" || { echo "usage: make install-remote BOX=HOST (an ssh destination)" >&2; exit 2; }
	$(MAKE) --no-print-directory build
	set -e; p=$$($(BIN) install $(INSTALL_FLAGS) --print-platform $(BOX)); \
	  GOOS=$${p%-*} GOARCH=$${p#*-} $(STATIC) $(GO) build -ldflags "$(LDFLAGS)" -o $(dir $(BIN))$$p/ ./cmd/agent-box ./cmd/agent-box-supervisor
	$(BIN) install $(INSTALL_FLAGS) --from $(dir $(BIN)) $(BOX)

# The test command of the README and of .ci/run: every package, with -race.
# testsum prints what go test prints, then one line naming the tests that
# skipped and why (a lane without its sshd or npm client must not pass
# unseen); pipefail keeps go test's own failure.
test: SHELL := /bin/bash
test:
	set -o pipefail; $(GO) test -race -count=1 -timeout 10m -json $(TESTPKGS) | $(GO) run ./internal/testsum

# The same packages without -race (.ci/run's second lane).
test-plain:
	$(GO) test -count=1 -timeout 10m $(TESTPKGS)

# Every package, the longest-running first. go test runs two at a time on
# two cores, in the order it is given them: ./... alone starts test/e2e and
# cmd/agent-box (most of the suite's CPU) only after the small packages'
# links and runs, and then ends with them running alone.
# go test lists each package once, where it first names it.
TESTPKGS := ./cmd/agent-box ./test/bench ./test/e2e ./test/faults ./test/chaos ./runs ./logread ./runrecord ./cmd/agent-box-demo ./...

test-short:
	$(GO) test -race -short -count=1 ./...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff

demo: build
	$(GO) run ./cmd/agent-box-demo --binary $(BIN)

# Fuzz every parser for FUZZTIME each (default 60s; CI uses a few seconds).
FUZZTIME ?= 60s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

fuzz-ci:
	$(MAKE) fuzz FUZZTIME=100000x

bench: build
	$(GO) run ./test/bench --binary $(BIN)

bench-quick: build
	$(GO) run ./test/bench --binary $(BIN) --quick
