# One entry point per workflow. `make test` is what CI runs.
GO        ?= go
FUZZTIME  ?= 20s
BENCHARGS ?=

.PHONY: test e2e bench fuzz lint build lambdas

build:
	$(GO) build ./...

# Unit, in-process and client tests. Suites whose outside tool is missing
# skip locally; .ci/run sets STRATA_REQUIRE_ALL=1 so they fail instead.
test:
	$(GO) test -race -count=1 -timeout 25m ./...

# End-to-end tests driving whole clusters (build tag e2e).
e2e:
	$(GO) test -count=1 -tags e2e -timeout 30m ./e2e/...

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

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The Lambda functions as linux/arm64 bootstrap binaries (provided.al2023),
# what infra/ packages.
LAMBDAS = trigger retryworker dlqconsole
lambdas:
	@set -e; for f in $(LAMBDAS); do \
	  echo "== functions/$$f/bootstrap"; \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -o functions/$$f/bootstrap ./functions/$$f/cmd; \
	done
