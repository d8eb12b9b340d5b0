#!/usr/bin/env bash
# The cost of idempotent publishing on a three-node cluster
# (scripts/cluster.sh): ./extbench's MPUB_EXT batches naming every message
# by ##msg_id against the same batches whose headers name nothing (another
# key of the same length), both to one ext topic of one partition
# replicated to the three nodes, with a dedupe window: the same leader
# and followers take both, and only the IDs differ. The rounds alternate
# and the summary has the medians.
#
#   ROUNDS   rounds of each (default 3)
#   RUNFOR   each run (Go duration, default 5s)
#   BATCHES  MPUB_EXT batch sizes (default "200 1")
#   WINDOW   the idempotent topic's dedupe_window (default 10m)
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
ROUNDS=${ROUNDS:-3} RUNFOR=${RUNFOR:-5s} BATCHES=${BATCHES:-"200 1"} WINDOW=${WINDOW:-10m}

work=$(mktemp -d)
stop() {
	"$root/scripts/cluster.sh" stop "$work" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap stop EXIT
go build -o "$work/extbench" ./extbench
"$root/scripts/cluster.sh" start "$work" >/dev/null

create() {
	local code
	code=$(curl -sS -o "$work/answer" -w '%{http_code}' -X POST \
		"http://127.0.0.1:14151/topic/create?topic=$1&partition_num=1&replicator=3&extend=true$2")
	[ "$code" = 200 ] || { echo "creating $1: $code $(cat "$work/answer")" >&2; exit 1; }
}
create ext_idem "&dedupe_window=$WINDOW"

# leader_tcp prints the TCP address of the node leading the topic's
# partition 0, once it is writable.
leader_tcp() {
	local port
	for _ in $(seq 100); do
		port=$(curl -sS "http://127.0.0.1:14151/lookup?topic=$1&access=w" |
			grep -o '"partitions":{"0":{[^}]*}' | grep -o '"tcp_port":[0-9]*' | cut -d: -f2 || true)
		if [ -n "$port" ]; then
			echo "127.0.0.1:$port"
			return
		fi
		sleep 0.1
	done
	echo "no writable leader for $1" >&2
	exit 1
}

results=$work/results
for round in $(seq "$ROUNDS"); do
	for batch in $BATCHES; do
		# The key "##msg_id" and its stand-in "##no_id_" are as long.
		for key in "##no_id_" "##msg_id"; do
			out=$("$work/extbench" --nsqd-tcp-address="$(leader_tcp ext_idem)" --topic=ext_idem \
				--batch-size="$batch" --id-key="$key" --runfor="$RUNFOR")
			rate=$(grep -o '[0-9.]*ops/s' <<<"$out" | cut -d. -f1)
			printf "round %d  batch %-4s %-10s %10s msgs/s\n" "$round" "$batch" "$key" "$rate"
			echo "$batch $key $rate" >>"$results"
		done
	done
done

echo
echo "median msgs/s of $ROUNDS round(s), 200-byte bodies, MPUB_EXT to a partition replicated to three nodes"
printf "%-6s %12s %12s %8s\n" batch "no IDs" "##msg_id" ratio
for batch in $BATCHES; do
	median() { grep "^$batch $1 " "$results" | cut -d' ' -f3 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
	plain=$(median "##no_id_") idem=$(median "##msg_id")
	printf "%-6s %12s %12s %8s\n" "$batch" "$plain" "$idem" "$(awk -v a="$idem" -v b="$plain" 'BEGIN {printf "%.2f", a/b}')"
done
