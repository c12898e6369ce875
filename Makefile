# The two commands a new user needs: `make demo` and `make test`.
GO ?= go
# The two OpenCode releases the e2e tests run on (1.18.34, the demo's,
# and 2.1.2), pinned as in scripts/install-opencode.sh and test/ochost.
OPENCODE_BIN ?= $(CURDIR)/.cache/opencode/node_modules/opencode-linux-x64/bin/opencode
OPENCODE2_VERSION = 2.1.2
OPENCODE2_BIN ?= $(CURDIR)/.cache/opencode-$(OPENCODE2_VERSION)/node_modules/@opencode/cli-linux-x64/bin/opencode
OPENCODE_ENV = OPENCODE_BIN=$(OPENCODE_BIN) OPENCODE2_BIN=$(OPENCODE2_BIN)

.PHONY: all build test unit e2e lint demo bench opencode clean release release-check

all: build

build:
	$(GO) build -o bin/mcp-reconnect ./cmd/mcp-reconnect

# opencode installs the pinned OpenCode binaries, 1.x and 2.x, into
# .cache/ (npm).
opencode:
	./scripts/install-opencode.sh >/dev/null
	./scripts/install-opencode.sh $(OPENCODE2_VERSION) >/dev/null

# test is the whole suite: formatting, vet, unit and end-to-end tests with
# the race detector, the latter against both real OpenCode releases.
test: opencode lint
	$(OPENCODE_ENV) $(GO) test -race -count=1 -timeout 30m ./...
	$(GO) -C tools test -race -count=1 ./...

unit: lint
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)
	$(GO) -C tools test -race -count=1 ./...

e2e: opencode
	$(OPENCODE_ENV) $(GO) test -race -count=1 -timeout 30m -v ./test/e2e/

# lint also vets and builds for macOS, a release target, and vets the
# release's tools and checks (tools/, test/release/: modules of their own,
# so that their dependencies are not mcp-reconnect's).
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=darwin $(GO) build ./...
	$(GO) -C tools vet ./...
	$(GO) -C test/release vet ./...

# demo starts a real OpenCode with real MCP servers under mcp-reconnect,
# breaks them, and shows them coming back. Before its first line of its
# own there is an npm install (once) and a Go build: it says so, and npm's
# notice of a newer npm is not the demo's to show.
demo:
	@echo "make demo: installing the pinned OpenCode (npm package opencode-linux-x64, about 180 MB) into .cache/opencode, unless it is there"
	@NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false ./scripts/install-opencode.sh >/dev/null
	@echo "make demo: building the demo (go run ./cmd/mcp-reconnect-demo; a first build downloads and compiles its Go modules)"
	@OPENCODE_BIN=$(OPENCODE_BIN) $(GO) run ./cmd/mcp-reconnect-demo

# bench measures the daemon at scale against the in-process fake, then
# recovery times on the real opencode (about four minutes); see BENCHMARKS.md.
bench: opencode
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/
	$(OPENCODE_ENV) $(GO) test -run '^$$' -bench Recovery -benchtime 1x -timeout 30m ./test/e2e/

# release builds what users download into dist/, reproducibly
# (scripts/release.sh says how): the binaries, one per target, stamped with
# version, commit and date; an archive of each (binary, completions, man
# pages, LICENSE, THIRD_PARTY_NOTICES, README.md); a .deb and an .rpm of
# each linux one; the npm packages (mcp-reconnect, and the binary of each
# target as @mcp-reconnect/OS-CPU); the container image of the linux ones
# as an OCI archive; the SBOM (SPDX JSON); the Homebrew formula for the
# tap, installing from the archives; SHA256SUMS of them all. release-check
# builds them and checks them (test/release): architecture, stamped
# version, no local paths; every archive and package opened, its files,
# modes and metadata read, its binary run (this machine's) or its CPU
# read; the notices against the SBOM; the npm packages published to a
# registry of the test's own on loopback (verdaccio, installed into .cache/
# by the test), installed from it with npm and npx and run; the image's
# platforms, binaries, user, entrypoint and labels; the SBOM against the
# binaries' build records; the formula's URLs and sha256 (loaded by Ruby
# where it is installed); and the whole release rebuilt from a copy of
# the tree elsewhere, the same bytes.
RELEASE_TARGETS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

# Where the release is published: the repository (formula homepage, image
# source label, packages' homepage), the base of the assets' URLs
# ($(RELEASE_URL)/VERSION/ASSET), the image's repository, the Homebrew tap
# (OWNER/NAME: the repository OWNER/homebrew-NAME), the license (SPDX; the
# project's is MIT, LICENSE) and the packages' maintainer. Override on the
# command line: make release RELEASE_URL=https://example.com/dl
SOURCE_URL ?= https://github.com/mcp-reconnect/mcp-reconnect
RELEASE_URL ?= $(SOURCE_URL)/releases/download
IMAGE_REPO ?= ghcr.io/mcp-reconnect/mcp-reconnect
BREW_TAP ?= mcp-reconnect/tap
LICENSE_SPDX ?= MIT
PACKAGE_MAINTAINER ?= the mcp-reconnect authors
RELEASE_ENV = GO=$(GO) SOURCE_URL=$(SOURCE_URL) RELEASE_URL=$(RELEASE_URL) IMAGE_REPO=$(IMAGE_REPO) BREW_TAP=$(BREW_TAP) \
	LICENSE_SPDX=$(LICENSE_SPDX) PACKAGE_MAINTAINER='$(PACKAGE_MAINTAINER)'

release:
	$(RELEASE_ENV) ./scripts/release.sh $(RELEASE_TARGETS)

# The checks are a module of their own (test/release/go.mod); its RPM
# reader builds without cgo.
release-check: release
	$(RELEASE_ENV) MCP_RECONNECT_RELEASE_DIR=$(CURDIR)/dist CGO_ENABLED=0 $(GO) -C test/release test -count=1 -timeout 20m -v ./

clean:
	rm -rf bin .cache dist
