#!/usr/bin/env bash
# Compares the per-packet CPU cost of several fusebox binaries on one chain: runs them in
# turn, N rounds, each replaying the input in memory, and prints the user CPU seconds each
# took (min / median / max). User CPU is far steadier than wall-clock Mpps on a shared
# machine, so this is the tool for bisecting a slowdown between commits; `fusebox bench`
# stays the measurement to report.
#
#   scripts/cpu-ab.sh N CHAIN NF.IFACE=PCAP MODE BIN...      (REPLAY=passes, default 60;
#   CHAIN may carry more run options, e.g. "examples/isp/chain.toml -D RULES=...")
#   scripts/cpu-ab.sh 5 examples/routers/chain.toml r1.eth0=trace64.pcap fastpath \
#       /tmp/old/fusebox target/release/fusebox
#
# Build the binaries alike (e.g. all with CARGO_INCREMENTAL=0): incremental builds split code
# differently and move the numbers by a few percent on their own.
set -euo pipefail
if [ $# -lt 5 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
n=$1 chain=$2 input=$3 mode=$4
shift 4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A times
for _ in $(seq "$n"); do
    for b in "$@"; do
        /usr/bin/time -o "$out/t" -f %U "$b" run $chain --input "$input" \
            --replay "${REPLAY:-60}" --mode "$mode" --out-dir "$out" >/dev/null 2>&1
        times[$b]="${times[$b]:-} $(tail -1 "$out/t")"
    done
done
for b in "$@"; do
    printf '%s: ' "$b"
    tr ' ' '\n' <<<"${times[$b]}" | grep . | sort -n |
        awk '{a[NR]=$1} END {printf "user CPU s min %s median %s max %s\n", a[1], a[int((NR+1)/2)], a[NR]}'
done
