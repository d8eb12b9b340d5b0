#!/usr/bin/env bash
# Side-by-side benchmark of nsqd v1.3.0 and Partita, both on disk, driven by
# nsqd's own bench_writer and bench_reader. One system runs at a time so the
# two never compete for the machine's cores; the order alternates per round so
# neither always gets the warmer page cache.
#
#   RUNFOR   duration of each bench tool run (Go duration, default 10s)
#   ROUNDS   rounds per system; the table shows medians (default 3)
#   SYSTEMS  systems to run, in round-1 order (default "nsqd partita")
#   PARTITA_ARGS  extra flags appended to Partita's command line
#   KEEP_WORKDIR=1  keep binaries, data dirs and logs after exit
#   TMPDIR   where the work dir (and so the data dirs) is created; must be disk
set -euo pipefail

RUNFOR=${RUNFOR:-10s}
ROUNDS=${ROUNDS:-3}
SYSTEMS=${SYSTEMS:-"nsqd partita"}
PARTITA_ARGS=${PARTITA_ARGS:-}

TOPIC=sub_bench
CHANNEL=ch
SIZE=200
WORKLOADS="write_b200 write_b1 read"
STARTUP_TIMEOUT=60
STOP_TIMEOUT=60

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

die() {
	echo "run.sh: $*" >&2
	exit 1
}

# Converts a Go duration (10s, 1m30s, 500ms) to seconds, so bench tools that
# hang on a broken server can be given a deadline.
duration_seconds() {
	awk -v d="$1" 'BEGIN {
		unit["h"] = 3600; unit["m"] = 60; unit["s"] = 1
		unit["ms"] = 0.001; unit["us"] = 0.000001; unit["µs"] = 0.000001; unit["ns"] = 0.000000001
		total = 0; rest = d
		if (rest == "") exit 1
		while (rest != "") {
			if (!match(rest, /^[0-9]+(\.[0-9]+)?/)) exit 1
			n = substr(rest, 1, RLENGTH); rest = substr(rest, RLENGTH + 1)
			if (!match(rest, /^(ns|us|µs|ms|h|m|s)/)) exit 1
			total += n * unit[substr(rest, 1, RLENGTH)]; rest = substr(rest, RLENGTH + 1)
		}
		printf "%.6f\n", total
	}'
}

RUNFOR_SECONDS=$(duration_seconds "$RUNFOR") || die "RUNFOR=$RUNFOR is not a Go duration (e.g. 10s, 1m)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$ROUNDS is not a positive integer"
[[ -n ${SYSTEMS// /} ]] || die "SYSTEMS is empty"
for sys in $SYSTEMS; do
	case $sys in
	nsqd | partita) ;;
	*) die "SYSTEMS: unknown system '$sys' (want nsqd and/or partita)" ;;
	esac
done
TOOL_TIMEOUT=$(awk -v s="$RUNFOR_SECONDS" 'BEGIN { printf "%d", s + 60 }')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/partita-e2e.XXXXXX")
BIN=$WORK/bin
RESULTS=$WORK/results
mkdir -p "$BIN"
: >"$RESULTS"

SERVER_PID=
CHILD_PID=
FAILED=0

cleanup() {
	if [[ -n $CHILD_PID ]]; then
		kill -TERM "$CHILD_PID" 2>/dev/null || true
		wait "$CHILD_PID" 2>/dev/null || true
	fi
	if [[ -n $SERVER_PID ]]; then
		stop_server || true
	fi
	if [[ ${KEEP_WORKDIR:-} == 1 ]]; then
		echo "work dir kept: $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Prints n ports below the kernel's ephemeral range that nothing on this
# machine is bound to or connected from.
free_ports() {
	local n=$1 used port picked=" "
	used=" $(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		while read -r hex; do echo $((16#$hex)); done | tr '\n' ' ') "
	while ((n > 0)); do
		port=$((20000 + RANDOM % 12000))
		[[ $used == *" $port "* || $picked == *" $port "* ]] && continue
		picked+="$port "
		echo "$port"
		n=$((n - 1))
	done
}

build() {
	local tools=(github.com/nsqio/nsq/bench/bench_writer github.com/nsqio/nsq/bench/bench_reader)
	[[ " $SYSTEMS " == *" nsqd "* ]] && tools+=(github.com/nsqio/nsq/apps/nsqd)
	echo "building ${tools[*]##*/} (nsq v1.3.0) ..."
	(cd "$HERE" && GOWORK=off go build -o "$BIN/" "${tools[@]}") || die "building nsq's tools failed"
	if [[ " $SYSTEMS " == *" partita "* ]]; then
		echo "building partita (./cmd/node) ..."
		(cd "$ROOT" && go build -o "$BIN/partita" ./cmd/node) ||
			die "building Partita's ./cmd/node failed (SYSTEMS=nsqd runs nsqd alone)"
	fi
}

# start_server sys dir: starts sys on fresh data under dir, sets SERVER_PID,
# TCP_ADDR and HTTP_ADDR, and returns once it answers /ping.
start_server() {
	local sys=$1 dir=$2 ports
	mkdir -p "$dir/data"
	mapfile -t ports < <(free_ports 5)
	TCP_ADDR=127.0.0.1:${ports[0]}
	HTTP_ADDR=127.0.0.1:${ports[1]}
	local cmd
	case $sys in
	nsqd)
		# --mem-queue-size=0 sends every message through the disk queue,
		# like Partita's log; sync settings stay at nsqd's defaults.
		cmd=("$BIN/nsqd" --data-path="$dir/data" --tcp-address="$TCP_ADDR"
			--http-address="$HTTP_ADDR" --https-address="127.0.0.1:${ports[2]}"
			--mem-queue-size=0)
		;;
	partita)
		# shellcheck disable=SC2206 # PARTITA_ARGS is a word list on purpose
		cmd=("$BIN/partita" --data-path="$dir/data" --tcp-address="$TCP_ADDR"
			--http-address="$HTTP_ADDR" --cluster-address="127.0.0.1:${ports[2]}"
			--etcd-client-address="127.0.0.1:${ports[3]}"
			--etcd-peer-address="127.0.0.1:${ports[4]}" $PARTITA_ARGS)
		;;
	esac
	SERVER_LOG=$dir/server.log
	"${cmd[@]}" >"$SERVER_LOG" 2>&1 &
	SERVER_PID=$!
	local deadline=$((SECONDS + STARTUP_TIMEOUT))
	until curl -fsS --max-time 1 "http://$HTTP_ADDR/ping" >/dev/null 2>&1; do
		kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$sys exited during startup"
		((SECONDS < deadline)) || server_failed "$sys did not answer /ping within ${STARTUP_TIMEOUT}s"
		sleep 0.1
	done
}

server_failed() {
	echo "run.sh: $1; last lines of its log:" >&2
	tail -n 30 "$SERVER_LOG" >&2 || true
	exit 1
}

# SIGTERM, then SIGKILL if the server has not exited after STOP_TIMEOUT.
stop_server() {
	local pid=$SERVER_PID deadline=$((SECONDS + STOP_TIMEOUT))
	SERVER_PID=
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "run.sh: server $pid ignored SIGTERM for ${STOP_TIMEOUT}s, killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
		FAILED=1
	fi
	wait "$pid" 2>/dev/null || true
}

# The server may still be electing or opening its log after /ping; retry the
# creates for a while before calling it a setup failure.
create_topic_and_channel() {
	local url deadline=$((SECONDS + 30))
	for url in "topic/create?topic=$TOPIC" "channel/create?topic=$TOPIC&channel=$CHANNEL"; do
		until curl -fsS --max-time 5 -X POST "http://$HTTP_ADDR/$url" >/dev/null; do
			((SECONDS < deadline)) || server_failed "POST /$url kept failing"
			sleep 0.2
		done
	done
}

# run_tool log cmd...: runs a bench tool in the background so the EXIT trap
# can stop it, and waits for it.
run_tool() {
	local log=$1 rc=0
	shift
	timeout --kill-after=5 "$TOOL_TIMEOUT" "$@" >"$log" 2>&1 &
	CHILD_PID=$!
	wait "$CHILD_PID" || rc=$?
	CHILD_PID=
	return "$rc"
}

# Prints "rate count" from a bench tool's final line: messages per second and
# messages moved (rate x measured duration).
parse_tool_log() {
	local line secs
	line=$(grep -o 'duration: [^ ]* - [0-9.]*mb/s - [0-9.]*ops/s' "$1" | tail -n 1) || return 1
	secs=$(duration_seconds "$(awk '{ print $2 }' <<<"$line")") || return 1
	awk -v secs="$secs" '{ sub(/ops\/s/, "", $6); printf "%.0f %.0f\n", $6, $6 * secs }' <<<"$line"
}

bench_system() {
	local sys=$1 round=$2 dir rate count written=0 workload log
	dir=$WORK/$sys-round$round
	mkdir -p "$dir"
	start_server "$sys" "$dir"
	create_topic_and_channel
	for workload in $WORKLOADS; do
		log=$dir/$workload.log
		local cmd=("$BIN/bench_writer" --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC"
			--runfor="$RUNFOR" --size="$SIZE")
		case $workload in
		write_b200) cmd+=(--batch-size=200) ;;
		write_b1) cmd+=(--batch-size=1) ;;
		read)
			cmd=("$BIN/bench_reader" --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC"
				--channel="$CHANNEL" --runfor="$RUNFOR" --size="$SIZE")
			;;
		esac
		if ! run_tool "$log" "${cmd[@]}" || ! read -r rate count < <(parse_tool_log "$log"); then
			echo "  $sys round $round $workload: FAILED; last lines of its output:" >&2
			tail -n 10 "$log" >&2
			echo "$sys $workload FAIL" >>"$RESULTS"
			FAILED=1
			kill -0 "$SERVER_PID" 2>/dev/null || server_failed "$sys died"
			continue
		fi
		echo "$sys $workload $rate" >>"$RESULTS"
		if [[ $workload == read ]]; then
			# The reader runs for the full RUNFOR; once it has drained the
			# backlog its rate only says the backlog was small.
			local drained=""
			((count + 1 >= written)) && drained=" (backlog drained: rate is a lower bound)"
			printf "  %-8s round %d  %-10s %10s msgs/s  %s of %s msgs written%s\n" \
				"$sys" "$round" "$workload" "$rate" "$count" "$written" "$drained"
			((count + 1 >= written)) && echo "$sys drained" >>"$RESULTS"
		else
			written=$((written + count))
			printf "  %-8s round %d  %-10s %10s msgs/s\n" "$sys" "$round" "$workload" "$rate"
		fi
	done
	stop_server
}

print_table() {
	awk -v systems="$SYSTEMS" -v workloads="$WORKLOADS" -v rounds="$ROUNDS" '
	function commas(n,   s) {
		s = sprintf("%.0f", n)
		while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
		return s
	}
	function median(key,   n, i, j, t, v) {
		n = split(vals[key], v, " ")
		if (n == 0) return -1
		for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	$2 == "drained" { drained[$1] = 1; next }
	$3 == "FAIL" { fails[$1 " " $2]++; next }
	{ vals[$1 " " $2] = vals[$1 " " $2] " " $3 }
	END {
		label["write_b200"] = "write, MPUB batch 200"
		label["write_b1"] = "write, MPUB batch 1"
		label["read"] = "read, RDY 2500 + FIN"
		ns = split(systems, sys, " "); nw = split(workloads, wl, " ")
		printf "\nmedian msgs/s of %d round(s), 200-byte messages\n", rounds
		printf "%-24s", "workload"
		for (i = 1; i <= ns; i++) printf " %14s", sys[i]
		printf " %14s", "partita/nsqd"
		printf "\n"
		for (w = 1; w <= nw; w++) {
			printf "%-24s", label[wl[w]]
			for (i = 1; i <= ns; i++) {
				m = median(sys[i] " " wl[w])
				cell = m < 0 ? "FAIL" : commas(m)
				if (fails[sys[i] " " wl[w]]) cell = cell " (" fails[sys[i] " " wl[w]] " failed)"
				if (wl[w] == "read" && drained[sys[i]]) cell = cell "*"
				printf " %14s", cell
			}
			p = median("partita " wl[w]); q = median("nsqd " wl[w])
			printf " %14s\n", (p > 0 && q > 0) ? sprintf("%.2f", p / q) : "-"
		}
		for (i = 1; i <= ns; i++) if (drained[sys[i]]) {
			print "* in some round the reader drained the whole backlog: its rate is a lower bound"
			break
		}
	}' "$RESULTS"
}

build
echo "work dir $WORK; RUNFOR=$RUNFOR ROUNDS=$ROUNDS SYSTEMS=\"$SYSTEMS\""
read -r -a order <<<"$SYSTEMS"
for ((round = 1; round <= ROUNDS; round++)); do
	echo "round $round"
	if ((round % 2 == 1)); then
		for sys in "${order[@]}"; do bench_system "$sys" "$round"; done
	else
		for ((i = ${#order[@]} - 1; i >= 0; i--)); do bench_system "${order[i]}" "$round"; done
	fi
done
print_table
if ((FAILED)); then
	echo "run.sh: some runs failed (see above)" >&2
	exit 1
fi
