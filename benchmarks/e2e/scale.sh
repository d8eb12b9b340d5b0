#!/usr/bin/env bash
# Scale benchmark: three Partita nodes on loopback with N partitions × 3
# replicas for each N, and with --system=nats3 three nats-servers with N
# JetStream streams × 3 replicas; see benchmarks/README.md ("Scale") for
# what it reports.
#
#   benchmarks/e2e/scale.sh                                 # this checkout's node, N=1000,3000
#   COMMITS="ec223a4 HEAD" benchmarks/e2e/scale.sh          # two commits, alternating per N
#   NODE_BIN=/tmp/partita-before benchmarks/e2e/scale.sh --partitions=1000,3000,10000
#   benchmarks/e2e/scale.sh --system=partita,nats3 --partitions=1000 --sweep=1000,2500,5000 --skip-failover
#
#   COMMITS   commits to build and measure (git archive of each, built apart
#             from the work tree); LABELS default to the commits' short hashes
#   NODE_BIN  comma-separated node binaries to measure instead of building
#   LABELS    comma-separated names for NODE_BIN's binaries
#   NATS_BIN  nats-server binary for --system=nats3 instead of building
#             v2.15.2 from the natsserver module
#   TMPDIR    where binaries, data and logs go; must be a disk
# Every other argument goes to the driver (benchmarks/e2e/scale, --help).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/partita-scale-bin.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The driver stops its nodes itself on SIGINT and SIGTERM; running it in
# the foreground passes those on.
(cd "$HERE" && GOWORK=off go build -o "$WORK/scale" ./scale)

# The systems asked for decide what to build: the driver's --system, in
# either of Go's flag spellings.
systems=partita
prev=
for a in "$@"; do
	case $prev in --system | -system) systems=$a ;; esac
	case $a in --system=* | -system=*) systems=${a#*=} ;; esac
	prev=$a
done
args=()
if [[ ",$systems," == *,nats3,* ]]; then
	nats=${NATS_BIN:-}
	if [[ -z $nats ]]; then
		# Its own module, so nats-server's dependencies stay at the
		# versions it was released with, as run.sh builds it.
		echo "building nats-server v2.15.2 ..."
		(cd "$HERE/natsserver" && GOWORK=off go build -o "$WORK/nats-server" github.com/nats-io/nats-server/v2)
		nats=$WORK/nats-server
	fi
	args+=(--nats-bin="$nats")
fi
if [[ ",$systems," != *,partita,* ]]; then
	"$WORK/scale" "${args[@]}" "$@"
	exit
fi

bins=${NODE_BIN:-}
labels=${LABELS:-}
if [[ -z $bins ]]; then
	commits=${COMMITS:-}
	if [[ -z $commits ]]; then
		(cd "$ROOT" && go build -o "$WORK/partita-worktree" ./cmd/node)
		bins=$WORK/partita-worktree
		labels=${labels:-"$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . ':!benchmarks' || echo +dirty)"}
	else
		names=()
		for c in $commits; do
			short=$(git -C "$ROOT" rev-parse --short "$c^{commit}")
			mkdir -p "$WORK/src-$short"
			git -C "$ROOT" archive "$short" | tar -x -C "$WORK/src-$short"
			(cd "$WORK/src-$short" && GOWORK=off go build -o "$WORK/partita-$short" ./cmd/node)
			bins+=${bins:+,}$WORK/partita-$short
			names+=("$short")
		done
		if [[ -z $labels ]]; then labels=$(IFS=,; echo "${names[*]}"); fi
	fi
fi
args+=(--node-bin="$bins")
[[ -n $labels ]] && args+=(--label="$labels")
"$WORK/scale" "${args[@]}" "$@"
