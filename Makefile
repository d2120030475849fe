# mailplane. `make run` runs it on this machine; `make test` runs every test.
# Both set up what they need on a fresh machine (Go, git, python3, Docker).

SHELL     := /bin/bash
GO        ?= go
BIN       := $(CURDIR)/bin
CACHE     := $(CURDIR)/.cache
MAILPIT   := $(CACHE)/bin/mailpit
MAILPIT_VERSION := v1.33.1
PKGS      := ./... ./pkg/...
export CGO_ENABLED := 0
export MAILPLANE_BIN := $(BIN)
export MAILPLANE_MAILPIT := $(MAILPIT)

.PHONY: build run test check unit fuzz e2e bench profile images deps clean policy

# How every binary is built (bench/README.md, "Idle memory", has what each
# flag does to the figures): -trimpath keeps this machine's paths out of
# them; -s -w drops the symbol table and DWARF, which no loaded segment
# holds (a panic's trace still names its functions and lines, from
# .gopclntab); urfave_cli_no_docs leaves out urfave/cli's man-page and
# Markdown generators (nothing calls them) and the Markdown libraries they
# link. It ends with the tags, so that make profile adds its own: ,profile.
BUILDFLAGS := -trimpath -ldflags='-s -w' -tags urfave_cli_no_docs

build:
	$(GO) build $(BUILDFLAGS) -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/mail-plane --log-format console up

# Everything `make test` needs that Go does not bring: a real Mailpit, and
# from Debian (scripts/deps.sh, one apt-get for all that is missing):
# headless Chromium for the inbox, swaks as an SMTP client, ip netns,
# PostgreSQL, the mail libraries of the frameworks in docs/candidate.md
# ("Configure your framework"), pytest, and systemd's tools and
# docker-compose for make e2e.
deps: $(MAILPIT)
	@scripts/deps.sh

$(MAILPIT):
	GOBIN=$(CACHE)/bin $(GO) install github.com/axllent/mailpit@$(MAILPIT_VERSION)

# Every fuzz target runs in unit on its committed corpus (testdata/fuzz/,
# as plain go test does), never by fuzzing: a fuzzer's find depends on its
# luck, and make test must answer the same on every clone.
test: deps build check unit python-test e2e

check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# The race pass runs every package but internal/hardening, whose tests
# drive only the real binaries (built without the race detector) over
# sockets: its test process runs nothing but its own load and probes, and
# the clients of pkg/rpc (which internal/plane's tests, under -race, call
# from many goroutines at once). The detector there doubled its CPU time
# (113 s against 56 s) and checked no code of the binaries under test.
# Without -race, it runs beside the race pass, whose packages mostly wait
# on processes and timeouts, so that the two share the cores; then
# plane's TestEvidenceRefusalFlood (100,000 refused sends from the test
# process to a plane), which skips under -race: the detector doubled its
# CPU time (46 s against 22 s) and checked nothing of the plane.
#
# The complexity tests (Test…Linear) time parsers, and TestFairShares…
# (TestFairShares, TestFairSharesMemory, TestFairSharesShedQuietest)
# hold a trial's answers under a flood to 2 s, which the race detector
# would distort: they skip under -race and run here without it, each on
# its own so that neither loads the other's timings. The complexity pass
# runs only the packages that have a Test…Linear (found in their source),
# not a test binary linked for each of the others to run nothing.
LINEAR_PKGS = grep -rlE 'func (Test|Fuzz|Example)[A-Za-z0-9_]*Linear' --include='*_test.go' \
	  --exclude-dir=.cache --exclude-dir=.git --exclude-dir=testdata . | xargs -n1 dirname | sort -u
unit:
	@set -e; \
	  { $(GO) test -count=1 -timeout 8m -skip 'TestFairShares' ./internal/hardening/ && \
	    $(GO) test -count=1 -timeout 4m -run '^TestEvidenceRefusalFlood$$' ./internal/plane/; } & norace=$$!; \
	  CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 8m \
	    $$($(GO) list $(PKGS) | grep -v '/internal/hardening$$') || { wait $$norace; exit 1; }; \
	  wait $$norace
	$(GO) test -count=1 -timeout 8m -run 'Linear' $$($(LINEAR_PKGS))
	$(GO) test -count=1 -timeout 4m -run 'TestFairShares' ./internal/hardening/
	CGO_ENABLED=1 $(GO) test -race -count=1 -tags profile ./internal/cliapp/

# The Python client (clients/python) against the real binaries in bin/,
# with Debian's pytest.
.PHONY: python-test
python-test: build
	@scripts/deps.sh pytest
	/usr/bin/python3 -m pytest -q -p no:cacheprovider clients/python/tests

# Fuzzing proper, FUZZTIME each (default 2m): every fuzz target from its
# committed corpus. A failing input is written to the package's
# testdata/fuzz/<target>/; commit it with the fix, and make test runs it
# from then on.
fuzz:
	@scripts/fuzz.sh $${FUZZTIME:-2m}

# The reliability suite's long form, whose figures the table in docs/reliability.md reports:
# every fuzz target for FUZZTIME each (default 60s) with its executions
# counted, then internal/hardening at full length (MAILPLANE_HARDENING=long).
.PHONY: hardening-long
hardening-long: deps build
	@scripts/hardening-long.sh $${FUZZTIME:-60s}

# One FROM-scratch image per binary (build/images/mail-*.Dockerfile), made
# from the static binaries in bin/, and the PostgreSQL zone's image
# (build/images/postgres.sh) from Debian's postgresql package on this
# machine: no base image is pulled.
MAILPLANE_TAG ?= local
images: build
	build/images/build.sh $(MAILPLANE_TAG) $(BIN) build/images/mail-*.Dockerfile
	@scripts/deps.sh postgres
	$(GO) build $(BUILDFLAGS) -o $(CACHE)/images/pg-entry ./build/pgentry
	build/images/postgres.sh $(MAILPLANE_TAG) $(CACHE)/images/pg-entry

# The deployment artefacts, proven (build/e2e): the compose stack from the
# images with the reachability matrix and the flow across containers, and
# the systemd units. Whatever the run starts is torn down, also when a check
# fails or the run is interrupted.
e2e: images
	@scripts/deps.sh e2e
	$(GO) build $(BUILDFLAGS) -o $(CACHE)/e2e/e2e-probe ./build/e2e/probe
	build/images/build.sh $(MAILPLANE_TAG) $(CACHE)/e2e build/e2e/e2e-probe.Dockerfile
	@project=mpe2e$$$$; \
	  trap 'build/e2e/down.sh '$$project EXIT; trap 'exit 130' INT TERM; \
	  MAILPLANE_E2E_PROJECT=$$project MAILPLANE_TAG=$(MAILPLANE_TAG) \
	  $(GO) test -tags e2e -count=1 -v -timeout 6m ./build/e2e/

# The benchmark (bench/): throughput, latency, memory, start-up and density,
# each figure next to its baseline from the same run (null servers, a real
# Mailpit), into results/: bench.md (the table), bench.png (the chart) and
# bench.json. About five minutes on 2 cores; run it on a quiet machine.
bench: build $(MAILPIT)
	$(GO) run ./bench -out results/

# CPU profiles of mail-plane serve and mail-writer under POST /emails, 512 B,
# 8 clients (bench/README.md, "Profiles"): binaries built as make build's
# plus the profile tag (the hidden --cpu-profile flag; a release build has
# neither it nor runtime/pprof), into results/profile/: plane.cpu.pprof,
# writer.cpu.pprof, their `go tool pprof -top` texts, and bench.md with the
# load's figure. About 20 seconds.
PROFILE_BIN := $(CACHE)/profile-bin
profile: $(MAILPIT)
	$(GO) build $(BUILDFLAGS),profile -o $(PROFILE_BIN)/ ./cmd/...
	$(GO) run ./bench -bin $(PROFILE_BIN) -only profile -out results/profile/

# After a change to the plane's policy table (internal/plane/policy.go):
# rewrite its golden file (internal/plane/testdata/policy.json, which the
# isolation matrix reads) and docs/rpc.md's table from it. Review the diff
# and commit it with the row.
policy:
	$(GO) test -count=1 ./internal/planecli/ -run '^TestPolicy(Doc|JSON)$$' -update

clean:
	rm -rf $(BIN)
