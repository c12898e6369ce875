# The two commands a new user needs: `make demo` and `make test`.
GO ?= go
OPENCODE_BIN ?= $(CURDIR)/.cache/opencode/node_modules/opencode-linux-x64/bin/opencode

.PHONY: all build test unit e2e lint demo bench opencode clean

all: build

build:
	$(GO) build -o bin/mcp-reconnect ./cmd/mcp-reconnect

# opencode installs the pinned OpenCode binary into .cache/ (npm).
opencode:
	./scripts/install-opencode.sh >/dev/null

# test is the whole suite: formatting, vet, unit and end-to-end tests with
# the race detector, against the real OpenCode binary.
test: opencode lint
	OPENCODE_BIN=$(OPENCODE_BIN) $(GO) test -race -count=1 -timeout 20m ./...

unit: lint
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)

e2e: opencode
	OPENCODE_BIN=$(OPENCODE_BIN) $(GO) test -race -count=1 -v ./test/e2e/

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# demo starts a real OpenCode with real MCP servers under mcp-reconnect,
# breaks them, and shows them coming back.
demo: opencode
	OPENCODE_BIN=$(OPENCODE_BIN) $(GO) run ./cmd/mcp-reconnect-demo

# bench measures the daemon at scale against the in-process fake, then
# recovery times on the real opencode (about four minutes); see BENCHMARKS.md.
bench: opencode
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/
	OPENCODE_BIN=$(OPENCODE_BIN) $(GO) test -run '^$$' -bench Recovery -benchtime 1x -timeout 30m ./test/e2e/

clean:
	rm -rf bin .cache
