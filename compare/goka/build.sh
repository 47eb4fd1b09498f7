#!/bin/sh
# Builds the goka peer to OUTDIR/goka. Prints nothing on stdout; a second
# run is cheap (Go's build cache).
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$(dirname "$0")"
GOWORK=off GOFLAGS=-mod=readonly go build -o "$out/goka" . >&2
