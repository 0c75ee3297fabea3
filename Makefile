# transcriber — every target installs the system packages it needs first.
GO       ?= go
# bash for pipefail: the test runner's status must survive its filter.
SHELL    := /bin/bash
BIN      := bin/transcriber
PKGS     := ./...
# The end-to-end package links the Temporal server; its first build takes
# minutes on a small machine, later ones come from the build cache.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all deps build run test test-short spec-check fmt vet lint bench clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	$(GO) build -o $(BIN) ./cmd/transcriber

# One command that shows the whole thing working: build, then transcribe a
# real recording from pocketsphinx-testdata with the embedded server and the
# offline engine.
run: build
	$(BIN) transcribe /usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav

# The results go through spec-check, which prints them as go test does and
# fails the run when a test that names a scenario was skipped.
test: deps fmt lint spec-check
	set -o pipefail; $(GO) test $(TESTFLAGS) -json $(PKGS) | $(GO) run ./scripts/speccheck -results

test-short: deps
	$(GO) test -short -count=1 $(PKGS)

spec-check:
	@$(GO) run ./scripts/speccheck

fmt:
	@out=$$(gofmt -l cmd activities workflows internal scripts); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# errcheck reads .errcheck-excludes, which says why each exclusion is safe.
lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 ./workflows/...
	$(GO) run github.com/kisielk/errcheck@v1.30.0 -exclude .errcheck-excludes $(PKGS)

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

clean:
	rm -rf bin
