#!/usr/bin/env bash
# Scale benchmark: three Partita nodes on loopback with N partitions × 3
# replicas for each N; see benchmarks/README.md ("Scale") for what it reports.
#
#   benchmarks/e2e/scale.sh                                 # this checkout's node, N=1000,3000
#   COMMITS="ec223a4 HEAD" benchmarks/e2e/scale.sh          # two commits, alternating per N
#   NODE_BIN=/tmp/partita-before benchmarks/e2e/scale.sh --partitions=1000,3000,10000
#
#   COMMITS   commits to build and measure (git archive of each, built apart
#             from the work tree); LABELS default to the commits' short hashes
#   NODE_BIN  comma-separated node binaries to measure instead of building
#   LABELS    comma-separated names for NODE_BIN's binaries
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
args=(--node-bin="$bins")
[[ -n $labels ]] && args+=(--label="$labels")
"$WORK/scale" "${args[@]}" "$@"
