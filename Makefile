# One entry point per workflow. `make test` is what CI runs.
GO        ?= go
FUZZTIME  ?= 20s
BENCHARGS ?=

.PHONY: test e2e bench fuzz lint build lambdas infra-test demo chaos compat

build:
	$(GO) build ./...

# Unit, in-process and client tests, then the chaos checker's own tests
# (synthetic histories, build tag chaos, no cluster: milliseconds), and the
# hostile-clients test again without -race, whose shadow memory would
# otherwise hide the resident-size bound it checks. Suites
# whose outside tool is missing skip locally; .ci/run sets
# STRATA_REQUIRE_ALL=1 so they fail instead (pkg/testenv).
test:
	$(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -race -count=1 -tags chaos -run '^(TestCheck|TestHistory)' ./e2e/chaos/
	$(GO) test -count=1 -run '^TestHostileClients$$' ./brokerfleet/internal/broker/

# franz-go's own pkg/kgo integration tests (the version in go.mod, copied
# from the module cache) against a fresh `brokerfleet dev` on random ports,
# judged against e2e/compat/expected-failures.txt: an unlisted failure or a
# listed test that passes fails the run. COMPATARGS go to the runner (e.g.
# -run TestGroupETL -keep). Needs the Go module proxy for the suite's own
# dependencies the first time.
COMPATARGS ?=
compat:
	$(GO) run ./e2e/compat/cmd/compat $(COMPATARGS)

# The CDK app (its own module, so the broker's tests never compile CDK):
# template assertions, the IAM check and a real offline `cdk synth` (needs
# `npm ci --prefix infra`; forced on by STRATA_REQUIRE_ALL=1).
infra-test:
	cd infra && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# The order pipeline (e2e/orders) against a fresh `brokerfleet dev` in a
# temporary directory, with a live summary, ending with billing's totals
# (PostgreSQL) beside analytics' (read from ClickHouse). PostgreSQL:
# $$STRATA_POSTGRES_URL, or a throwaway server from Debian's postgresql
# package; ClickHouse: $$STRATA_CLICKHOUSE_URL, or a throwaway server from
# Debian's clickhouse-server package (free ports). DEMOARGS go to
# `orders demo` (e.g. -count 50000 -rate 5000). Needs ports 9092-9094, 8081
# and 9644-9646 free.
DEMOARGS ?=
demo:
	@set -e; dir=$$(mktemp -d); pid=; \
	trap 'test -z "$$pid" || { kill $$pid; wait $$pid; } 2>/dev/null; rm -rf $$dir' EXIT INT TERM; \
	$(GO) build -o $$dir/ ./brokerfleet ./e2e/orders/cmd/orders; \
	$$dir/brokerfleet dev -data $$dir/data >$$dir/dev.out 2>$$dir/dev.log & pid=$$!; \
	for i in $$(seq 1 120); do grep -q 'strata ready' $$dir/dev.out && break; \
	  kill -0 $$pid 2>/dev/null || { cat $$dir/dev.log; exit 1; }; sleep 0.5; done; \
	grep -q 'strata ready' $$dir/dev.out || { echo 'brokerfleet dev: no ready line in 60s'; tail $$dir/dev.log; exit 1; }; \
	cat $$dir/dev.out; \
	$$dir/orders demo $(DEMOARGS)

# Fault injection (e2e/chaos, build tag chaos): every TestChaos* test, the
# scenarios against three serve processes, STRATA_CHAOS_DURATION each
# (default 60s; about 11 min on 2 cores for TestChaos, and about 2.5 min for
# TestChaosShareGroups and TestChaosShareUnsafeAckIsCaught). STRATA_CHAOS_SEED
# replays a schedule; STRATA_CHAOS_OUT keeps the histories, reports and
# broker logs.
chaos:
	$(GO) test -tags chaos -count=1 -timeout 40m ./e2e/chaos/ -run TestChaos -v

# Every end-to-end suite in e2e/, each driving a whole cluster: the order
# pipeline (e2e/orders, also part of `make test`), then every chaos
# scenario (`make chaos`).
e2e:
	$(GO) test -count=1 -timeout 15m ./e2e/...
	$(MAKE) chaos

# Throughput and latency against franz-go's kfake in the same run.
bench:
	$(GO) run ./brokerfleet bench $(BENCHARGS)

# Every fuzz target, FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# gofmt over every Go file git tracks or would add (not ignored, so not
# node_modules), the infra module's included; a failing `git ls-files`
# fails. go vet over the broker module, with the chaos tag for e2e/chaos;
# `make infra-test` vets the infra module (it compiles the CDK). vet sees
# the Linux build: the three !linux stubs are only gofmt-checked here.
lint:
	@set -e; files=$$(git ls-files --cached --others --exclude-standard -- '*.go'); \
	n=0; keep=; for f in $$files; do if [ -e "$$f" ]; then keep="$$keep $$f"; n=$$((n+1)); fi; done; \
	test "$$n" -gt 0 || { echo "lint: git ls-files listed no Go files"; exit 1; }; \
	out=$$(gofmt -l $$keep); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi; \
	echo "gofmt: $$n files"
	$(GO) vet ./...
	$(GO) vet -tags chaos ./e2e/chaos/

# The Lambda functions as linux/arm64 bootstrap binaries (provided.al2023),
# what infra/ packages: the three Kafka functions, the custom resource that
# issues the deployment's private CA and broker certificate, and the
# example consumer of Lambda's own Kafka event source (-c esmExample=true).
LAMBDAS = trigger retryworker dlqconsole certissuer esmexample
lambdas:
	@set -e; for f in $(LAMBDAS); do \
	  echo "== functions/$$f/bootstrap"; \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -o functions/$$f/bootstrap ./functions/$$f/cmd; \
	done
