# bucketlog — developer targets. CI runs .ci/run, which calls the same commands.
GO        ?= go
PKGS      := ./...
# Packages that start goroutines: the race detector runs over them in CI.
RACE_PKGS := . ./localseg/... ./blobtier/... ./tailbatch/... ./reclaim/... ./watermark/... ./coldload/... ./affinity/... ./emulator_test/... ./cmd/... ./internal/... ./examples/... ./client/...
FUZZTIME  ?= 10s

.PHONY: all build test race vet lint fuzz bench bench-quick demo crash examples clean

all: vet test

build:
	$(GO) build $(PKGS)

test:
	$(GO) test $(PKGS)

race:
	$(GO) test -race $(RACE_PKGS)

vet:
	$(GO) vet $(PKGS)
	cd bench && $(GO) vet ./...

lint: vet
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every fuzz target runs briefly (FUZZTIME each: a duration or a count such as
# 10000x; CI uses a count, see .ci/run); seed corpora live under testdata/fuzz.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

bench:
	cd bench && $(GO) run . 

bench-quick:
	cd bench && $(GO) run . -quick

demo:
	$(GO) run ./cmd/bucketlog demo

# The kill -9 campaign: 80 kills in each of 6 scenarios (480), a few minutes.
KILLS ?= 80
crash:
	$(GO) test -run TestKill9 -count=1 -v -timeout 40m ./internal/kill9/ -kill9.kills=$(KILLS) -kill9.json=crash-results.json

examples:
	$(GO) build ./examples/...

clean:
	rm -rf bin bench/results

# The seeded whole-engine simulation (internal/sim): SEEDS seeds from START,
# every odd seed with a second owner of the shard (writer fencing), then the
# RED control (unfenced writers: the oracle must fail within a few seeds);
# SIMFLAGS adds e.g. -sim.known=1,4 -sim.keepgoing -sim.classify -sim.writers.
SEEDS ?= 1000
START ?= 1
.PHONY: sim
sim:
	$(GO) test ./internal/sim -run 'TestSim$$|TestSimNoFenceREDControl' -count=1 -timeout 0 -v -sim.seeds=$(SEEDS) -sim.start=$(START) $(SIMFLAGS)
