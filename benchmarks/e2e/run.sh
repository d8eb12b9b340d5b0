#!/usr/bin/env bash
# Side-by-side benchmark of nsqd v1.3.0, a Partita node, a three-node
# Partita cluster and a three-server NATS JetStream cluster, all on disk,
# driven by nsqd's own bench_writer and bench_reader, by the open-loop tool
# in ./latency and, for NATS, by ./natsbench's equivalents. One system runs
# at a time so they never compete for the machine's cores; the order
# alternates per round so none always gets the warmer page cache.
#
#   RUNFOR   duration of each bench tool run (Go duration, default 10s)
#   ROUNDS   rounds per system; the table shows medians (default 3)
#   SYSTEMS  systems to run, in round-1 order (default "nsqd partita partita3 nats3")
#            nsqd: nsqd v1.3.0; partita: one node; partita3: three nodes,
#            topic replicated to all three, clients on the partition leader;
#            partita-base, partita3-base: the same, built from BASELINE;
#            nats3: nats-server v2.15.2, three servers, JetStream stream
#            with 3 replicas on file storage, clients on the stream leader;
#            nats1: one nats-server v2.15.2, a stream with 1 replica on
#            file storage, to set a single node's cost beside nats3's
#            relay3: ./relay, the floor of a synchronously replicated write
#            here: a leader that appends each write to a file and answers
#            once two followers that do the same have acked it, nothing
#            else (no actors, no commit log); relay1: the same alone.
#            Writes and latency only: the read workloads skip them
#   BASELINE  a git revision of this repository to build for the -base
#            systems, so an old and a new build are measured in one run
#   SERVER_ENV  environment for every server process, e.g. GOMAXPROCS=1
#   PARTITA_ARGS  extra flags appended to every Partita node's command line
#   BASE_ARGS  the -base systems' flags instead of PARTITA_ARGS, when set:
#            with BASELINE=HEAD two settings of one build are compared, e.g.
#            PARTITA_ARGS="--write-window 1" BASE_ARGS="" BASELINE=HEAD
#   LATENCY_RATE  PUBs per second of the latency workload (default 10000)
#   WORKLOADS  workloads to run, in order (default "latency write_b200 write_b1 read");
#            also gonsq_pub and gonsq_read: go-nsq v1.1.0's Producer.Publish
#            one message at a time, and one Consumer at max_in_flight 2500
#            (NSQ systems only; nats1, nats3, relay1 and relay3 skip them)
#   PROFILE  a directory: every Partita node's CPU profile during each
#            workload is saved there as SYS-rROUND-WORKLOAD-nodeN.pprof
#            (read with go tool pprof; costs a little CPU of its own)
#   SETTLE   at most this many seconds (default 30) to wait before each
#            workload for the servers to go idle: nsqd goes on copying a
#            batch-200 backlog into its channel for seconds after the writer
#            stops, and the next workload would otherwise share the CPU with
#            it; 0 does not wait
#   KEEP_WORKDIR=1  keep binaries, data dirs and logs after exit
#   TMPDIR   where the work dir (and so the data dirs) is created; must be disk
set -euo pipefail

RUNFOR=${RUNFOR:-10s}
ROUNDS=${ROUNDS:-3}
SYSTEMS=${SYSTEMS:-"nsqd partita partita3 nats3"}
PARTITA_ARGS=${PARTITA_ARGS:-}
SETTLE=${SETTLE:-30}

# args_of is the extra flags of a Partita system.
args_of() {
	if [[ $1 == *-base ]]; then
		echo "${BASE_ARGS-$PARTITA_ARGS}"
	else
		echo "$PARTITA_ARGS"
	fi
}
LATENCY_RATE=${LATENCY_RATE:-10000}

TOPIC=sub_bench
CHANNEL=ch
SIZE=200
WORKLOADS=${WORKLOADS:-"latency write_b200 write_b1 read"}
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
[[ $LATENCY_RATE =~ ^[1-9][0-9]*$ ]] || die "LATENCY_RATE=$LATENCY_RATE is not a positive integer"
[[ -n ${SYSTEMS// /} ]] || die "SYSTEMS is empty"
[[ -n ${WORKLOADS// /} ]] || die "WORKLOADS is empty"
for workload in $WORKLOADS; do
	case $workload in
	write_b200 | write_b1 | read | latency | gonsq_pub | gonsq_read) ;;
	*) die "WORKLOADS: unknown workload '$workload' (want some of write_b200, write_b1, read, latency, gonsq_pub, gonsq_read)" ;;
	esac
done
for sys in $SYSTEMS; do
	case $sys in
	nsqd | partita | partita3 | nats1 | nats3 | relay1 | relay3) ;;
	partita-base | partita3-base) [[ -n ${BASELINE:-} ]] || die "SYSTEMS: $sys needs BASELINE=<git revision>" ;;
	*) die "SYSTEMS: unknown system '$sys' (want some of nsqd, partita, partita3, partita-base, partita3-base, nats1, nats3, relay1, relay3)" ;;
	esac
done
if [[ " $SYSTEMS " == *" partita3 "* || " $SYSTEMS " == *" partita3-base "* ]]; then
	command -v jq >/dev/null || die "partita3 needs jq to find the partition leader"
fi
TOOL_TIMEOUT=$(awk -v s="$RUNFOR_SECONDS" 'BEGIN { printf "%d", s + 60 }')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/partita-e2e.XXXXXX")
BIN=$WORK/bin
RESULTS=$WORK/results
mkdir -p "$BIN"
: >"$RESULTS"

SERVER_PIDS=()
CHILD_PID=
FAILED=0

cleanup() {
	if [[ -n $CHILD_PID ]]; then
		kill -TERM "$CHILD_PID" 2>/dev/null || true
		wait "$CHILD_PID" 2>/dev/null || true
	fi
	if ((${#SERVER_PIDS[@]})); then
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
	local tools=(github.com/nsqio/nsq/bench/bench_writer github.com/nsqio/nsq/bench/bench_reader ./latency ./gonsqbench)
	[[ " $SYSTEMS " == *" nsqd "* ]] && tools+=(github.com/nsqio/nsq/apps/nsqd)
	[[ " $SYSTEMS " == *" nats"[13]" "* ]] && tools+=(./natsbench)
	[[ " $SYSTEMS " == *" relay"[13]" "* ]] && tools+=(./relay)
	echo "building ${tools[*]##*/} (nsq v1.3.0, nats.go v1.55.0) ..."
	(cd "$HERE" && GOWORK=off go build -o "$BIN/" "${tools[@]}") || die "building the bench tools failed"
	if [[ " $SYSTEMS " == *" nats"[13]" "* ]]; then
		# Its own module, so nats-server's dependencies stay at the versions
		# it was released with and out of the tools' module.
		echo "building nats-server v2.15.2 ..."
		(cd "$HERE/natsserver" && GOWORK=off go build -o "$BIN/nats-server" github.com/nats-io/nats-server/v2) ||
			die "building nats-server failed"
	fi
	if [[ " $SYSTEMS " == *" partita "* || " $SYSTEMS " == *" partita3 "* ]]; then
		echo "building partita (./cmd/node) ..."
		(cd "$ROOT" && go build -o "$BIN/partita" ./cmd/node) ||
			die "building Partita's ./cmd/node failed (SYSTEMS=nsqd runs nsqd alone)"
	fi
	if [[ " $SYSTEMS " == *"-base "* ]]; then
		echo "building partita at $BASELINE ..."
		mkdir -p "$WORK/base-src"
		git -C "$ROOT" archive "$BASELINE" | tar -x -C "$WORK/base-src" ||
			die "BASELINE=$BASELINE: not a revision of this repository"
		(cd "$WORK/base-src" && go build -o "$BIN/partita-base" ./cmd/node) || die "building $BASELINE failed"
	fi
}

# start_server sys dir: starts sys on fresh data under dir, sets SERVER_PIDS,
# and the first node's TCP_ADDR and HTTP_ADDR (partita3, nats3: NODE_HTTP
# holds every node's), and returns once every process answers /ping
# (nats3: /healthz, which waits for JetStream's meta leader).
start_server() {
	local sys=$1 dir=$2 ports partita=$BIN/partita ready=/ping
	[[ $sys == *-base ]] && partita=$BIN/partita-base
	mapfile -t ports < <(free_ports 11)
	SERVER_LOGS=()
	NODE_HTTP=()
	NATS_URLS=()
	LEADER_INDEX=0
	case $sys in
	nsqd)
		# --mem-queue-size=0 sends every message through the disk queue,
		# like Partita's log; sync settings stay at nsqd's defaults.
		start_process "$dir" "${ports[0]}" "${ports[1]}" "$BIN/nsqd" --data-path="$dir/data" \
			--https-address="127.0.0.1:${ports[2]}" --mem-queue-size=0
		;;
	partita | partita-base)
		start_process "$dir" "${ports[0]}" "${ports[1]}" "$partita" --data-path="$dir/data" \
			--cluster-address="127.0.0.1:${ports[2]}" --etcd-client-address="127.0.0.1:${ports[3]}" \
			--etcd-peer-address="127.0.0.1:${ports[4]}" $(args_of "$sys")
		;;
	partita3 | partita3-base)
		# Node 1 runs the embedded etcd the other two use.
		local etcd=127.0.0.1:${ports[3]} i
		start_process "$dir/node1" "${ports[0]}" "${ports[1]}" "$partita" --data-path="$dir/node1/data" \
			--node-id=1 --cluster-address="127.0.0.1:${ports[2]}" --etcd-client-address="$etcd" \
			--etcd-peer-address="127.0.0.1:${ports[4]}" $(args_of "$sys")
		for i in 2 3; do
			local p=$((5 + 3 * (i - 2)))
			start_process "$dir/node$i" "${ports[p]}" "${ports[p + 1]}" "$partita" --data-path="$dir/node$i/data" \
				--node-id="$i" --cluster-address="127.0.0.1:${ports[p + 2]}" --etcd-endpoints="$etcd" $(args_of "$sys")
		done
		;;
	relay1)
		start_process "$dir" "${ports[0]}" "${ports[1]}" "$BIN/relay" --data-path="$dir/data"
		;;
	relay3)
		# The leader first, as with the other systems; it waits for its
		# followers to listen.
		start_process "$dir/node1" "${ports[0]}" "${ports[1]}" "$BIN/relay" --data-path="$dir/node1/data" \
			--followers="127.0.0.1:${ports[2]},127.0.0.1:${ports[4]}"
		start_process "$dir/node2" "${ports[2]}" "${ports[3]}" "$BIN/relay" --data-path="$dir/node2/data" --follow
		start_process "$dir/node3" "${ports[4]}" "${ports[5]}" "$BIN/relay" --data-path="$dir/node3/data" --follow
		;;
	nats1 | nats3)
		start_nats "$dir" "${sys#nats}" "${ports[@]:0:9}"
		ready=/healthz
		;;
	esac
	local deadline=$((SECONDS + STARTUP_TIMEOUT)) i
	for i in "${!NODE_HTTP[@]}"; do
		SERVER_LOG=${SERVER_LOGS[i]}
		until curl -fsS --max-time 1 "http://${NODE_HTTP[i]}$ready" >/dev/null 2>&1; do
			kill -0 "${SERVER_PIDS[i]}" 2>/dev/null || server_failed "$sys exited during startup"
			((SECONDS < deadline)) || server_failed "$sys did not answer /ping within ${STARTUP_TIMEOUT}s"
			sleep 0.1
		done
	done
	TCP_ADDR=127.0.0.1:${ports[0]}
	HTTP_ADDR=${NODE_HTTP[0]}
}

# start_process dir tcp-port http-port cmd...: starts one server process on
# loopback, logging to dir/server.log.
start_process() {
	local dir=$1 tcp=127.0.0.1:$2 http=127.0.0.1:$3
	shift 3
	mkdir -p "$dir/data"
	SERVER_LOG=$dir/server.log
	env ${SERVER_ENV:-} "$@" --tcp-address="$tcp" --http-address="$http" >"$SERVER_LOG" 2>&1 &
	SERVER_PIDS+=($!)
	SERVER_LOGS+=("$SERVER_LOG")
	NODE_HTTP+=("$http")
}

# start_nats dir n port...: starts n nats-servers (1 or 3), clustered on
# loopback when more than one, with JetStream on, each storing under
# dir/nodeN/data, from nine ports: client, route and monitoring port of
# each. Sync settings stay at nats-server's defaults, as nsqd's and
# Partita's do.
start_nats() {
	local dir=$1 n=$2 i routes=""
	shift 2
	local ports=("$@")
	for ((i = 0; i < n; i++)); do routes+="${routes:+, }nats://127.0.0.1:${ports[3 * i + 1]}"; done
	for ((i = 0; i < n; i++)); do
		local node=$dir/node$((i + 1)) client=127.0.0.1:${ports[3 * i]} http=127.0.0.1:${ports[3 * i + 2]}
		mkdir -p "$node/data"
		cat >"$node/nats.conf" <<-EOF
			server_name: n$((i + 1))
			listen: $client
			http: $http
			jetstream { store_dir: "$node/data" }
		EOF
		((n == 1)) || echo "cluster { name: bench, listen: \"127.0.0.1:${ports[3 * i + 1]}\", routes: [$routes] }" >>"$node/nats.conf"
		SERVER_LOG=$node/server.log
		env ${SERVER_ENV:-} "$BIN/nats-server" -c "$node/nats.conf" >"$SERVER_LOG" 2>&1 &
		SERVER_PIDS+=($!)
		SERVER_LOGS+=("$SERVER_LOG")
		NODE_HTTP+=("$http")
		NATS_URLS+=("nats://$client")
	done
}

server_failed() {
	echo "run.sh: $1; last lines of its log:" >&2
	tail -n 30 "$SERVER_LOG" >&2 || true
	exit 1
}

# Stops the server processes in reverse start order (a cluster's etcd host
# last, so the others can deregister): SIGTERM, then SIGKILL if one has not
# exited after STOP_TIMEOUT. An unclean exit fails the run.
stop_server() {
	local pids=("${SERVER_PIDS[@]}") i pid rc
	SERVER_PIDS=()
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		local deadline=$((SECONDS + STOP_TIMEOUT))
		kill -TERM "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: server $pid ignored SIGTERM for ${STOP_TIMEOUT}s, killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
			FAILED=1
		fi
		rc=0
		wait "$pid" 2>/dev/null || rc=$?
		if ((rc != 0)); then
			echo "run.sh: server $pid exited with status $rc after SIGTERM; last lines of ${SERVER_LOGS[i]}:" >&2
			tail -n 10 "${SERVER_LOGS[i]}" >&2 || true
			FAILED=1
		fi
	done
}

# The server may still be electing, opening its log or (partita3) waiting
# for its peers to register after /ping; retry for a while before calling it
# a setup failure.
create_topic_and_channel() {
	local sys=$1 create="topic/create?topic=$TOPIC" deadline=$((SECONDS + 30))
	if [[ $sys == nats* ]]; then
		setup_nats "$sys" "$2"
		return
	fi
	[[ $sys == partita3* ]] && create+="&partition_num=1&replicator=3"
	post_until_ok "$create" "$deadline"
	[[ $sys == partita3* ]] && find_leader "$deadline"
	post_until_ok "channel/create?topic=$TOPIC&channel=$CHANNEL" "$deadline"
}

post_until_ok() {
	until curl -fsS --max-time 5 -X POST "http://$HTTP_ADDR/$1" >/dev/null 2>&1; do
		((SECONDS < $2)) || server_failed "POST /$1 to $HTTP_ADDR kept failing"
		sleep 0.2
	done
}

# find_leader points TCP_ADDR and HTTP_ADDR at the node leading the topic's
# partition: the one whose /lookup lists it under "partitions".
find_leader() {
	local i lookup
	while ((SECONDS < $1)); do
		for i in "${!NODE_HTTP[@]}"; do
			lookup=$(curl -fsS --max-time 5 "http://${NODE_HTTP[i]}/lookup?topic=$TOPIC" 2>/dev/null) || continue
			if jq -e '(.partitions // .data.partitions // {}) | length > 0' <<<"$lookup" >/dev/null 2>&1; then
				HTTP_ADDR=${NODE_HTTP[i]}
				LEADER_INDEX=$i
				TCP_ADDR=$(jq -r '(.partitions // .data.partitions)[] | "\(.broadcast_address):\(.tcp_port)"' <<<"$lookup" | head -n 1)
				echo "  partita3 leader of $TOPIC: node $((i + 1)), tcp $TCP_ADDR"
				return
			fi
		done
		sleep 0.2
	done
	SERVER_LOG=${SERVER_LOGS[0]}
	server_failed "no node leads $TOPIC"
}

# setup_nats sys dir: makes stream $TOPIC (file storage, as many replicas as
# sys has servers) and the durable pull consumer $CHANNEL, with the
# consumer's leader moved to the stream's leader, and points TCP_ADDR and
# HTTP_ADDR at that server.
setup_nats() {
	local sys=$1 log=$2/setup.log name url i
	if ! run_tool "$log" "$BIN/natsbench" setup --servers="$(IFS=,; echo "${NATS_URLS[*]}")" \
		--stream="$TOPIC" --consumer="$CHANNEL" --replicas="${sys#nats}" --timeout=30s ||
		! read -r name url < <(awk '$1 == "leader" { print $2, $3 }' "$log"); then
		echo "run.sh: natsbench setup failed:" >&2
		tail -n 10 "$log" >&2
		SERVER_LOG=${SERVER_LOGS[0]}
		server_failed "no stream leader for $TOPIC"
	fi
	for i in "${!NATS_URLS[@]}"; do
		if [[ ${NATS_URLS[i]} == "$url" ]]; then
			LEADER_INDEX=$i
			HTTP_ADDR=${NODE_HTTP[i]}
		fi
	done
	TCP_ADDR=${url#nats://}
	echo "  $sys leader of $TOPIC (stream and consumer): server $name, $url"
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

# Prints "sent acked errors unanswered p50 p99" from the latency tool's
# output, latencies in µs.
parse_latency_log() {
	awk '
	$1 == "sent:" { sent = $2; acked = $4; errors = $6; unanswered = $8 }
	$1 == "latency" { for (i = 3; i < NF; i++) v[$i] = $(i + 1) }
	END {
		if (sent == "" || v["p50"] == "") exit 1
		print sent, acked, errors, unanswered, v["p50"], v["p99"]
	}' "$1"
}

workload_failed() {
	local sys=$1 round=$2 workload=$3 log=$4 i
	echo "  $sys round $round $workload: FAILED; last lines of its output:" >&2
	tail -n 10 "$log" >&2
	echo "$sys $workload FAIL" >>"$RESULTS"
	FAILED=1
	for i in "${!SERVER_PIDS[@]}"; do
		SERVER_LOG=${SERVER_LOGS[i]}
		kill -0 "${SERVER_PIDS[i]}" 2>/dev/null || server_failed "$sys died"
	done
}

# workload_cmd sys workload: sets CMD to the tool and arguments that run
# workload against sys's clients' address, TCP_ADDR.
workload_cmd() {
	local sys=$1 workload=$2 batch=${2#write_b}
	if [[ $sys == nats* ]]; then
		CMD=("$BIN/natsbench" "${workload%_b*}" --server="nats://$TCP_ADDR" --stream="$TOPIC" --size="$SIZE")
		case $workload in
		latency) CMD+=(--rate="$LATENCY_RATE" --duration="$RUNFOR") ;;
		write_*) CMD+=(--runfor="$RUNFOR" --batch-size="$batch") ;;
		read) CMD+=(--runfor="$RUNFOR" --consumer="$CHANNEL") ;;
		esac
		return
	fi
	case $workload in
	latency)
		CMD=("$BIN/latency" --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC" --rate="$LATENCY_RATE"
			--duration="$RUNFOR" --size="$SIZE")
		;;
	write_*)
		CMD=("$BIN/bench_writer" --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC" --runfor="$RUNFOR"
			--size="$SIZE" --batch-size="$batch")
		;;
	read)
		CMD=("$BIN/bench_reader" --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC" --channel="$CHANNEL"
			--runfor="$RUNFOR" --size="$SIZE")
		;;
	gonsq_pub)
		CMD=("$BIN/gonsqbench" pub --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC" --runfor="$RUNFOR" --size="$SIZE")
		;;
	gonsq_read)
		CMD=("$BIN/gonsqbench" read --nsqd-tcp-address="$TCP_ADDR" --topic="$TOPIC" --channel="$CHANNEL" --runfor="$RUNFOR")
		;;
	esac
}

# The latency workload publishes LATENCY_RATE PUBs a second, open loop; a
# run with any error or unanswered PUB counts as failed. It runs first by
# default, so it sees the system idle rather than flushing the writers'
# hundreds of megabytes. Sets LATENCY_ACKED for the reader's accounting.
run_latency() {
	local sys=$1 round=$2 log=$3 sent acked errors unanswered p50 p99
	LATENCY_ACKED=0
	workload_cmd "$sys" latency
	PROFILE_SYS=$sys PROFILE_ROUND=$round PROFILE_WORKLOAD=latency
	cpu_mark
	if run_tool "$log" "${CMD[@]}" && cpu_stop &&
		read -r sent acked errors unanswered p50 p99 < <(parse_latency_log "$log") &&
		((acked > 0 && errors == 0 && unanswered == 0)); then
		LATENCY_ACKED=$acked
		printf "%s latency_p50 %s\n%s latency_p99 %s\n" "$sys" "$p50" "$sys" "$p99" >>"$RESULTS"
		printf "  %-8s round %d  %-10s p50 %6s µs, p99 %6s µs (%s PUBs at %s/s, open loop)\n" \
			"$sys" "$round" latency "$p50" "$p99" "$acked" "$LATENCY_RATE"
		record_cpu "$sys" latency "$acked"
		if [[ $sys == partita* ]]; then server_latency; fi
		return
	fi
	workload_failed "$sys" "$round" latency "$log"
}

# cpu_mark, cpu_stop and record_cpu measure the CPU the server processes
# and the whole machine used during a workload: at a fixed rate, how busy
# the cores are decides the latency tail as much as the server's own path
# does, and at full speed CPU per message is the cost being compared.
cpu_mark() {
	local i
	profile_start
	# The leader first, so the figures line up across rounds and systems.
	CPU_PIDS=("${SERVER_PIDS[LEADER_INDEX]}")
	for i in "${!SERVER_PIDS[@]}"; do
		((i == LEADER_INDEX)) || CPU_PIDS+=("${SERVER_PIDS[i]}")
	done
	CPU_MARK_AT=$(date +%s%N)
	CPU_MARK_PROCS=$(proc_ticks "${CPU_PIDS[@]}")
	CPU_MARK_MACHINE=$(machine_ticks)
}

cpu_stop() {
	CPU_STOP_AT=$(date +%s%N)
	CPU_STOP_PROCS=$(proc_ticks "${CPU_PIDS[@]}")
	CPU_STOP_MACHINE=$(machine_ticks)
	profile_wait
}

# profile_start asks every Partita node for a CPU profile of the coming
# workload (RUNFOR rounded down, at least a second), in the background;
# PROFILE_SYS, PROFILE_ROUND and PROFILE_WORKLOAD name the files.
profile_start() {
	PROFILE_JOBS=()
	[[ -n ${PROFILE:-} && $PROFILE_SYS == partita* ]] || return 0
	mkdir -p "$PROFILE"
	local secs i
	secs=$(awk -v d="$RUNFOR" 'BEGIN { s = d + 0; if (d ~ /ms$/) s = 0; else if (d ~ /m$/) s *= 60; print (s < 1 ? 1 : int(s)) }')
	for i in "${!NODE_HTTP[@]}"; do
		curl -fsS --max-time $((secs + 30)) -o "$PROFILE/$PROFILE_SYS-r$PROFILE_ROUND-$PROFILE_WORKLOAD-node$((i + 1)).pprof" \
			"http://${NODE_HTTP[i]}/debug/pprof/profile?seconds=$secs" &
		PROFILE_JOBS+=($!)
	done
}

profile_wait() {
	local j
	for j in "${PROFILE_JOBS[@]}"; do wait "$j" || echo "run.sh: a CPU profile failed" >&2; done
	PROFILE_JOBS=()
}

# record_cpu sys workload msgs: prints and records each server process's
# CPU between cpu_mark and cpu_stop in percent of one core, their total,
# the server CPU per message moved, and the machine's busy share of all
# its cores.
record_cpu() {
	local sys=$1 workload=$2 msgs=$3 line
	line=$(awk -v hz="$(getconf CLK_TCK)" -v ms="$(((CPU_STOP_AT - CPU_MARK_AT) / 1000000))" -v msgs="$msgs" \
		-v p0="$CPU_MARK_PROCS" -v p1="$CPU_STOP_PROCS" -v m0="$CPU_MARK_MACHINE" -v m1="$CPU_STOP_MACHINE" 'BEGIN {
		n = split(p0, a); split(p1, b); split(m0, c); split(m1, d)
		for (i = 1; i <= n; i++) { ticks += b[i] - a[i]; procs = procs sprintf(" %.0f", (b[i] - a[i]) / hz / (ms / 1000) * 100) }
		printf "%.0f %.1f %.0f%s\n", ticks / hz / (ms / 1000) * 100, (msgs > 0 ? ticks / hz * 1e6 / msgs : 0),
			(d[1] - c[1]) / (d[2] - c[2]) * 100, procs
	}')
	local total per_msg machine procs k
	read -r total per_msg machine procs <<<"$line"
	read -r -a procs <<<"$procs"
	{
		echo "$sys cpu_$workload $total"
		echo "$sys cpumsg_$workload $per_msg"
		for k in "${!procs[@]}"; do echo "$sys cpu$((k + 1))_$workload ${procs[k]}"; done
	} >>"$RESULTS"
	local each=""
	((${#procs[@]} > 1)) && each="$(IFS=+; echo "${procs[*]}" | sed 's/+/ + /g') % (leader first) = "
	echo "    server CPU: $each$total % of a core, $per_msg µs per message; the machine $machine % busy over its $(nproc) cores"
}

# proc_ticks pid...: user plus system clock ticks each process has used.
proc_ticks() {
	local p
	for p in "$@"; do awk '{ printf "%d ", $14 + $15 }' "/proc/$p/stat" 2>/dev/null || printf "0 "; done
}

# settle waits until the server processes used at most a tenth of a core
# each over half a second, for at most SETTLE seconds, and says how long it
# waited when that was more than the first half second.
settle() {
	local sys=$1 deadline=$((SECONDS + SETTLE)) start=$SECONDS before after used t
	((SETTLE > 0)) || return 0
	while :; do
		before=$(proc_ticks "${SERVER_PIDS[@]}")
		sleep 0.5
		after=$(proc_ticks "${SERVER_PIDS[@]}")
		used=0
		for t in $after; do used=$((used + t)); done
		for t in $before; do used=$((used - t)); done
		# 5 ticks of 10 ms in half a second: 10 % of a core.
		((used <= 5 * ${#SERVER_PIDS[@]})) && break
		((SECONDS < deadline)) || { echo "  $sys still busy after ${SETTLE}s; measuring anyway" >&2; return 0; }
	done
	((SECONDS - start > 1)) && echo "  $sys went idle after $((SECONDS - start)) s"
	return 0
}

# machine_ticks: busy and total clock ticks of all cores since boot.
machine_ticks() {
	awk '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6; exit }' /proc/stat
}

# server_latency prints, from the partition leader's /metrics, where the
# latency workload's time went inside the node: publish (arrival at the
# partition actor to answer), commit (local write to commit) and, with
# replicas, each follower's ack. Upper bounds of histogram buckets.
server_latency() {
	curl -fsS --max-time 5 "http://$HTTP_ADDR/metrics" 2>/dev/null | awk '
	function show(m, label,   i, p50, p99) {
		if (cnt[m] == 0) return
		p50 = ""; p99 = ""
		for (i = 0; i < n[m]; i++) {
			if (p50 == "" && b[m, i] >= cnt[m] * 0.5) p50 = le[m, i]
			if (p99 == "" && b[m, i] >= cnt[m] * 0.99) p99 = le[m, i]
		}
		printf "           %-26s mean %6.0f µs, p50 ≤ %6.0f µs, p99 ≤ %6.0f µs\n", label, sum[m] / cnt[m] * 1e6, p50 * 1e6, p99 * 1e6
	}
	/^partita_replica_frames_total/ { frames += $2 }
	/^partita_replica_frame_records_total/ { records += $2 }
	/^partita_(publish|commit|replica_ack)_latency_seconds_/ {
		name = $1; sub(/\{.*/, "", name)
		m = name; sub(/_(bucket|sum|count)$/, "", m)
		if (name ~ /_bucket$/) {
			if ($1 ~ /le="\+Inf"/) next
			match($1, /le="[^"]+"/); v = substr($1, RSTART + 4, RLENGTH - 5)
			if (!((m, v) in idx)) { idx[m, v] = n[m]; le[m, n[m]] = v; n[m]++ }
			b[m, idx[m, v]] += $2
		} else if (name ~ /_sum$/) sum[m] += $2
		else cnt[m] += $2
	}
	END {
		show("partita_publish_latency_seconds", "in the leader: publish")
		show("partita_commit_latency_seconds", "local write to commit")
		show("partita_replica_ack_latency_seconds", "follower ack")
		if (frames > 0) printf "           %-26s %6.2f (%d records in %d frames since the node started)\n", "records per frame", records / frames, records, frames
	}'
}

# skips sys workload: true when sys does not run workload (go-nsq's on
# NATS; anything that reads on the relays).
skips() {
	[[ $1 == nats* && $2 == gonsq_* ]] || [[ $1 == relay* && ($2 == read || $2 == gonsq_*) ]]
}

bench_system() {
	local sys=$1 round=$2 dir rate count written=0 workload log
	dir=$WORK/$sys-round$round
	mkdir -p "$dir"
	start_server "$sys" "$dir"
	create_topic_and_channel "$sys" "$dir"
	for workload in $WORKLOADS; do
		log=$dir/$workload.log
		skips "$sys" "$workload" || settle "$sys"
		if [[ $workload == latency ]]; then
			run_latency "$sys" "$round" "$log"
			written=$((written + LATENCY_ACKED))
			continue
		fi
		skips "$sys" "$workload" && continue
		workload_cmd "$sys" "$workload"
		PROFILE_SYS=$sys PROFILE_ROUND=$round PROFILE_WORKLOAD=$workload
		cpu_mark
		if ! run_tool "$log" "${CMD[@]}" || ! cpu_stop || ! read -r rate count < <(parse_tool_log "$log"); then
			workload_failed "$sys" "$round" "$workload" "$log"
			continue
		fi
		echo "$sys $workload $rate" >>"$RESULTS"
		if [[ $workload == read || $workload == gonsq_read ]]; then
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
		record_cpu "$sys" "$workload" "$count"
	done
	stop_server
}

print_table() {
	awk -v systems="$SYSTEMS" -v workloads="$WORKLOADS" -v rounds="$ROUNDS" -v rate="$LATENCY_RATE" '
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
	function cell(s, w, m,   c) {
		# No value and no failure: the workload does not apply (the go-nsq
		# ones on NATS, reads on the relays).
		c = m >= 0 ? commas(m) : fails[s " " w] ? "FAIL" : "-"
		if (fails[s " " w]) c = c " (" fails[s " " w] " failed)"
		return c
	}
	$2 == "drained" { drained[$1] = 1; next }
	$3 == "FAIL" { fails[$1 " " $2]++; next }
	$2 ~ /^cpu[0-9]+_/ { k = substr($2, 4) + 0; if (k > nproc[$1]) nproc[$1] = k }
	{ vals[$1 " " $2] = vals[$1 " " $2] " " $3 }
	END {
		label["write_b200"] = "write, MPUB batch 200"
		label["write_b1"] = "write, MPUB batch 1"
		label["read"] = "read, RDY 2500 + FIN"
		label["gonsq_pub"] = "go-nsq Publish, one at a time"
		label["gonsq_read"] = "go-nsq Consumer, 2500 in flight"
		label["latency"] = "pub latency @" rate "/s"
		ns = split(systems, sys, " "); nw = split(workloads, wl, " ")
		# Ratio columns: every system over nsqd, when nsqd ran; every
		# three-node Partita over NATS, when nats3 ran; every one-node
		# Partita over NATS, when nats1 ran.
		nr = 0
		for (i = 1; i <= ns; i++) if (sys[i] == "nsqd") withNSQD = 1; else if (sys[i] == "nats3") withNATS = 1; else if (sys[i] == "nats1") withNATS1 = 1
		for (i = 1; withNSQD && i <= ns; i++) if (sys[i] != "nsqd") { num[++nr] = sys[i]; den[nr] = "nsqd" }
		for (i = 1; withNATS && i <= ns; i++) if (sys[i] ~ /^partita3/) { num[++nr] = sys[i]; den[nr] = "nats3" }
		for (i = 1; withNATS1 && i <= ns; i++) if (sys[i] ~ /^partita($|-)/) { num[++nr] = sys[i]; den[nr] = "nats1" }
		for (w = 1; w <= nw; w++) if (wl[w] == "latency") latency = 1; else throughput = 1
		if (throughput) printThroughput()
		if (latency) printLatency()
		printCPU()
	}
	function printThroughput(   w, i, r, c, p, q) {
		printf "\nmedian msgs/s of %d round(s), 200-byte messages\n", rounds
		printf "%-24s", "workload"
		for (i = 1; i <= ns; i++) printf " %14s", sys[i]
		for (r = 1; r <= nr; r++) printf " %14s", num[r] "/" den[r]
		printf "\n"
		for (w = 1; w <= nw; w++) {
			if (wl[w] == "latency") continue
			printf "%-24s", label[wl[w]]
			for (i = 1; i <= ns; i++) {
				c = cell(sys[i], wl[w], median(sys[i] " " wl[w]))
				if (wl[w] == "read" && drained[sys[i]]) c = c "*"
				printf " %14s", c
			}
			for (r = 1; r <= nr; r++) {
				p = median(num[r] " " wl[w]); q = median(den[r] " " wl[w])
				printf " %14s", (p > 0 && q > 0) ? sprintf("%.2f", p / q) : "-"
			}
			printf "\n"
		}
		for (i = 1; i <= ns; i++) if (drained[sys[i]]) {
			print "* in some round the reader drained the whole backlog: its rate is a lower bound"
			break
		}
	}
	function printLatency(   i, k, pct) {
		printf "\npub latency @%s/s, open loop, 8 connections: median µs of %d round(s)\n", rate, rounds
		printf "%-24s", "percentile"
		for (i = 1; i <= ns; i++) printf " %14s", sys[i]
		printf "\n"
		for (k = 1; k <= 2; k++) {
			pct = k == 1 ? "p50" : "p99"
			printf "%-24s", pct
			for (i = 1; i <= ns; i++) printf " %14s", cell(sys[i], "latency", median(sys[i] " latency_" pct))
			printf "\n"
		}
	}
	function printCPU() {
		cpuTable(sprintf("server CPU, %% of one core (each process, the leader first): median of %d round(s)", rounds), "cpu")
		cpuTable(sprintf("server CPU per message, µs (all server processes): median of %d round(s)", rounds), "cpumsg")
	}
	# Medians of each figure: the per-process ones need not add up to the
	# median total.
	function cpuTable(title, key,   w, i, k, m, c, each) {
		printf "\n%s\n%-24s", title, "workload"
		for (i = 1; i <= ns; i++) printf " %18s", sys[i]
		printf "\n"
		for (w = 1; w <= nw; w++) {
			printf "%-24s", label[wl[w]]
			for (i = 1; i <= ns; i++) {
				m = median(sys[i] " " key "_" wl[w])
				c = m < 0 ? "-" : key == "cpumsg" ? sprintf("%.1f", m) : commas(m)
				if (m >= 0 && key == "cpu" && nproc[sys[i]] > 1) {
					each = ""
					for (k = 1; k <= nproc[sys[i]]; k++) each = each (k > 1 ? "+" : "") commas(median(sys[i] " cpu" k "_" wl[w]))
					c = c " (" each ")"
				}
				printf " %18s", c
			}
			printf "\n"
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
