#!/usr/bin/env bash
# Builds the image of deploy/Containerfile with podman from the static
# binary and checks that a container of it starts a node that answers
# /ping and takes a publish. Needs podman and runc (scripts/test.sh
# installs them).
#
# The container shares the host's network, so no container network needs
# to be set up, and its ports are picked free on 127.0.0.1. It runs under
# runc with rlimits below the host's: crun refuses hybrid cgroups, and
# podman's default rlimits are above what a process here may set.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
name=partita-image-test-$$
tag=localhost/partita-image-test:$$
cleanup() {
	podman rm -f -v "$name" >/dev/null 2>&1 || true
	podman rmi -f "$tag" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 go build -trimpath -o "$work/partita" ./cmd/node
podman build -q -t "$tag" -f deploy/Containerfile "$work" >/dev/null

# free_port prints a port on 127.0.0.1 that nothing accepts on now, below
# the kernel's ephemeral range, where outgoing connections (the test
# suite's, running beside) take their local ports.
ephemeral=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((10000 + RANDOM % (ephemeral - 10000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "no free port found" >&2
	return 1
}

# serves starts a container on fresh ports and waits until it answers
# /ping, 60 s at most (its embedded etcd's first election on a loaded
# machine). It fails when the container stops, printing its log.
serves() {
	podman rm -f -v "$name" >/dev/null 2>&1 || true
	tcp=$(free_port) http=$(free_port) cluster=$(free_port) etcd=$(free_port) peer=$(free_port)
	podman --runtime runc run -d --name "$name" --network host \
		--ulimit nofile=1024:4096 --ulimit nproc=4096:8192 "$tag" \
		--data-path /data --tcp-address "127.0.0.1:$tcp" --http-address "127.0.0.1:$http" \
		--cluster-address "127.0.0.1:$cluster" --etcd-client-address "127.0.0.1:$etcd" \
		--etcd-peer-address "127.0.0.1:$peer" >/dev/null
	for _ in $(seq 600); do
		if [ "$(curl -s -m 1 "http://127.0.0.1:$http/ping" || true)" = OK ]; then
			return 0
		fi
		if [ "$(podman inspect -f '{{.State.Running}}' "$name")" != true ]; then
			podman logs "$name" >"$work/log" 2>&1 || true
			return 1
		fi
		sleep 0.1
	done
	echo "the container never answered /ping:" >&2
	podman logs "$name" >&2
	exit 1
}

# A port taken between its pick and the node's bind (the suite's other
# tests listen too) is tried again on other ports; any other failure ends
# the test.
for attempt in 1 2 3; do
	if serves; then
		break
	fi
	if [ "$attempt" = 3 ] || ! grep -q "address already in use" "$work/log"; then
		echo "the container stopped:" >&2
		cat "$work/log" >&2
		exit 1
	fi
done
answer=$(curl -s -m 10 -d hello "http://127.0.0.1:$http/pub?topic=image_test")
if [ "$answer" != OK ]; then
	echo "a publish to the container was answered: $answer" >&2
	podman logs "$name" >&2
	exit 1
fi
echo "the image builds, and its container answers /ping and takes a publish"
