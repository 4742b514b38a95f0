# The full test suite: what CI runs (.ci/run) and what a contributor runs.
# Tests that need redis-server skip without it, unless REDLOCK_REQUIRE_REDIS=1.
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet staticcheck unit quickstart fmt

test: vet staticcheck
	$(GO) test -race -count=1 -timeout 15m ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

staticcheck:
	$(STATICCHECK) ./...

# Fast unit tests only (miniredis; no redis-server needed).
unit:
	$(GO) test -short -count=1 ./...

quickstart:
	$(GO) run ./examples/quickstart

fmt:
	gofmt -w .
