#!/bin/sh
# Regenerates messages/*.pb.go from messages/*.proto. Runs from any directory.
set -eu
cd "$(dirname "$0")"
exec go run . ../../messages
