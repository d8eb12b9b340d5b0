#!/usr/bin/env bash
# Starts or stops a local three-node Partita cluster on loopback.
#
#   scripts/cluster.sh start [DIR]   # build, start nodes 1-3 (data and logs in DIR, default ./tmp/cluster)
#   scripts/cluster.sh stop  [DIR]   # SIGTERM every node, wait for them to exit
#
# Node N listens on TCP 127.0.0.1:N4150, HTTP N4151, cluster N4152; node 1
# runs the embedded etcd (127.0.0.1:14379) and nodes 2 and 3 use it.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
dir=${2:-./tmp/cluster}

start() {
	mkdir -p "$dir"
	go build -o "$dir/partita" ./cmd/node
	for n in 1 2 3; do
		if [ -f "$dir/node$n.pid" ] && kill -0 "$(cat "$dir/node$n.pid")" 2>/dev/null; then
			echo "node $n already running (pid $(cat "$dir/node$n.pid"))"
			continue
		fi
		args=(--node-id "n$n" --data-path "$dir/data$n"
			--tcp-address "127.0.0.1:${n}4150" --http-address "127.0.0.1:${n}4151"
			--cluster-address "127.0.0.1:${n}4152"
			--etcd-client-address 127.0.0.1:14379 --etcd-peer-address 127.0.0.1:14380)
		[ "$n" = 1 ] || args+=(--etcd-endpoints 127.0.0.1:14379)
		"$dir/partita" "${args[@]}" >"$dir/node$n.log" 2>&1 &
		echo $! >"$dir/node$n.pid"
		for _ in $(seq 1 150); do
			curl -fsS "http://127.0.0.1:${n}4151/ping" >/dev/null 2>&1 && break
			sleep 0.2
		done
		curl -fsS "http://127.0.0.1:${n}4151/ping" >/dev/null || { echo "node $n did not start; see $dir/node$n.log" >&2; exit 1; }
		echo "node $n up: tcp 127.0.0.1:${n}4150 http 127.0.0.1:${n}4151"
	done
	echo "create a replicated topic: curl -X POST 'http://127.0.0.1:14151/topic/create?topic=T&partition_num=3&replicator=3'"
}

stop() {
	# Nodes 2 and 3 first: node 1 holds the etcd they use.
	for n in 3 2 1; do
		f="$dir/node$n.pid"
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if kill -TERM "$pid" 2>/dev/null; then
			for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			kill -0 "$pid" 2>/dev/null && { echo "node $n did not stop, killing it"; kill -KILL "$pid"; }
		fi
		rm -f "$f"
		echo "node $n stopped"
	done
}

case "$cmd" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
