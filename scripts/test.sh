#!/usr/bin/env bash
# Runs Partita's whole test suite on a fresh machine: the docs check
# (scripts/check-docs.sh), formatting, vet, the race-enabled tests of every
# module (the multi-process cluster and fault tests in tests/cluster among
# them), and short runs of every fuzz target.
# Installs what the tests need when it is missing: Debian packages (the
# external etcd 3.4 the cluster contract is checked against, chromium for
# the nsqadmin browser test, prometheus with promtool for the dashboard
# tests, Node.js and npm for the nsqjs test, podman and runc for the
# container image; no service is started) and Go
# modules, which the go command fetches itself.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "go is not installed" >&2; exit 1; }

# stage names a stage with the time it starts and the seconds since the
# suite began, so a slow run shows which stage grew.
stage() { echo "== $* [$(date -u +%H:%M:%S), ${SECONDS}s]"; }

stage "docs: no outside citations, no work-period narration"
./scripts/check-docs.sh

# install_deb PACKAGE FILE [APT-OPTION...]: installs Debian's PACKAGE unless
# FILE exists.
apt_updated=
install_deb() {
	[ -e "$2" ] && return 0
	stage "installing $1"
	local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
	[ -n "$apt_updated" ] || { $sudo apt-get update -qq; apt_updated=1; }
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${@:3}" "$1" >/dev/null
}
install_deb etcd-server /usr/bin/etcd
install_deb chromium /usr/bin/chromium
# prometheus and promtool for the dashboard tests; its recommends are ~320 MB
# of web assets they do not need.
install_deb prometheus /usr/bin/promtool --no-install-recommends
# The nsqjs test installs its locked client itself (npm ci in tests/nsqjs).
install_deb nodejs /usr/bin/node
install_deb npm /usr/bin/npm
# podman, under runc, builds and runs the container image.
install_deb podman /usr/bin/podman
install_deb runc /usr/bin/runc

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$') 2>/dev/null || true)
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

stage "go vet"
go vet ./...

stage "container image (deploy/Containerfile) builds and serves"
./scripts/image-test.sh

stage "go test -race (product module)"
# go test starts packages' tests in the order they are named. The
# multi-process cluster and fault tests (tests/cluster) are the longest by
# far, so they start first and run beside the rest instead of after it.
go test -race -count=1 -timeout 20m ./tests/cluster/ ./...

stage "go test (dashboards module: JSON current, strict Grafana schema, PromQL, metric names)"
(cd dashboards && go vet ./... && go test -count=1 ./...)

stage "go test (protobuf generator module: generated code is current)"
(cd tools/protogen && go test -count=1 ./...)

stage "go test (end-to-end benchmark clients: open-loop schedule, latency, natsbench, gonsqbench, relay, extbench, tracewindow)"
(cd benchmarks/e2e && go vet ./... && go test -race -count=1 ./openloop/ ./latency/ ./natsbench/ ./gonsqbench/ ./testserver/ ./relay/ ./extbench/ ./tracewindow/)

stage "nsq tools against a three-node cluster (tests/nsqtools module)"
export ARTIFACTS=${ARTIFACTS:-/tmp/partita-artifacts}
(cd tests/nsqtools && go vet ./... && go test -race -count=1 -timeout 10m ./...)
echo "nsqadmin screenshots: $ARTIFACTS"

# Budgets are execution counts, about 10 s of each target here: a duration
# (-fuzztime 10s) hits Go 1.26's coordinator race golang/go#75804, which
# fails a clean run with "context deadline exceeded" at the deadline.
# FUZZTIME, when set, replaces every budget (e.g. FUZZTIME=10m).
stage "fuzz targets"
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-$3}" "$1"; }
fuzz ./protocol/ FuzzReadCommand 20000x
fuzz ./storage/ FuzzOpenPartition 1000x
fuzz ./storage/ FuzzChannelStateLoad 20000x
fuzz ./replication/ FuzzLeaderFrame 40000x
fuzz ./messages/ FuzzVTDecodesAsProtobuf 20000x
fuzz ./actors/topic/ FuzzFollowerCheck 60000x

echo "all test stages passed [${SECONDS}s]"
