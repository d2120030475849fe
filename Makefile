# mailplane. `make run` runs it on this machine; `make test` runs every test.
# Both set up what they need on a fresh machine (Go, git, python3, Docker).

SHELL     := /bin/bash
GO        ?= go
BIN       := $(CURDIR)/bin
CACHE     := $(CURDIR)/.cache
MAILPIT   := $(CACHE)/bin/mailpit
MAILPIT_VERSION := v1.33.1
PKGS      := ./... ./pkg/...
FUZZTIME  ?= 5s
export CGO_ENABLED := 0
export MAILPLANE_BIN := $(BIN)
export MAILPLANE_MAILPIT := $(MAILPIT)

.PHONY: build run test check unit fuzz-short fuzz e2e bench images deps clean

build:
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/mail-plane --log-format console up

# Everything `make test` needs that Go does not bring: a real Mailpit,
# headless Chromium for the inbox, swaks as an SMTP client.
deps: $(MAILPIT)
	@command -v chromium >/dev/null && command -v swaks >/dev/null || { \
	  echo "installing chromium and swaks (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium swaks >/dev/null; }

$(MAILPIT):
	GOBIN=$(CACHE)/bin $(GO) install github.com/axllent/mailpit@$(MAILPIT_VERSION)

test: deps build check unit fuzz-short

check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 8m $(PKGS)

# A short run of every fuzz target (seed corpora in testdata/); `make fuzz`
# runs each for longer.
fuzz-short:
	@scripts/fuzz.sh $(FUZZTIME)

fuzz:
	@scripts/fuzz.sh $${FUZZTIME:-2m}

e2e: build
	@echo "e2e: the container deployment test lands with build/ (issue [deploy])"

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 1 ./internal/bench/... 2>/dev/null || \
	  $(GO) test -run '^$$' -bench . -benchtime 2s -count 1 $(PKGS)

clean:
	rm -rf $(BIN)
