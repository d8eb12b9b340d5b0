#!/usr/bin/env bash
# Runs Partita's whole test suite on a fresh machine: formatting, vet, the
# race-enabled tests of every module, and short runs of every fuzz target.
# Installs what the tests need when it is missing: Go modules (the go command
# fetches them) and Debian's prometheus package, whose prometheus and
# promtool binaries the dashboard tests run (the service is never started).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "go is not installed" >&2; exit 1; }
FUZZTIME=${FUZZTIME:-10s}

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	echo "== installing Debian's prometheus (for promtool and the dashboard tests)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends prometheus >/dev/null ||
		{ apt-get update -qq && apt-get install -y --no-install-recommends prometheus >/dev/null; }
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$') 2>/dev/null || true)
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

echo "== go vet"
go vet ./...

echo "== go test -race (product module)"
go test -race -count=1 -timeout 20m ./...

echo "== go test (dashboards module: JSON current, strict Grafana schema, PromQL, metric names)"
(cd dashboards && go vet ./... && go test -count=1 ./...)

echo "== go test (protobuf generator module: generated code is current)"
(cd tools/protogen && go test -count=1 ./...)

echo "== fuzz targets, $FUZZTIME each"
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1"; }
fuzz ./protocol/ FuzzReadCommand
fuzz ./storage/ FuzzOpenPartition
fuzz ./storage/ FuzzChannelStateLoad

echo "all test stages passed"
