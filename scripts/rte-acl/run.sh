#!/usr/bin/env bash
# Same-run comparison of `fusebox classify` with DPDK's rte_acl (outside CI; see
# docs/benchmarks.md, "Classifier against rte_acl").
#
#   scripts/rte-acl/run.sh [--rounds R] [--passes P] [--draw N] [SET...]
#
# Installs libdpdk-dev and pkg-config if missing (Debian), builds the harness
# (scripts/rte-acl/bench.c, DPDK's public API only) into target/rte-acl-bench with
# pkg-config, builds the release fusebox, then for every SET (default: every ClassBench 10k
# filter set under $CLASSBENCH, default ../shared/data/classbench) runs
#   fusebox classify --rules SET (--trace SET_trace | --draw N) --rte-acl target/rte-acl-bench
# which times FuseBox's batch lookups and then every rte_acl algorithm the CPU has (scalar,
# SSE, AVX2, AVX-512 x16 and x32) on the same headers, R rounds alternating, and checks that
# all answers are equal. Prints each set's lines and a summary: FuseBox ÷ rte_acl's best SIMD
# algorithm (median of per-round ratios of fastest passes, range).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=5 passes=10 draw=100000 sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --passes) passes="$2"; shift 2 ;;
    --draw) draw="$2"; shift 2 ;;
    *) sets+=("$1"); shift ;;
  esac
done
CLASSBENCH="${CLASSBENCH:-../shared/data/classbench}"
if [ ${#sets[@]} -eq 0 ]; then
  while IFS= read -r f; do sets+=("$f"); done < <(ls "$CLASSBENCH"/*/*_10k | sort)
fi
. scripts/apt-install.sh
pkg-config --exists libdpdk 2>/dev/null || apt_install libdpdk-dev pkg-config
mkdir -p target
# shellcheck disable=SC2046 # pkg-config prints several flags
cc -O2 -Wall -o target/rte-acl-bench scripts/rte-acl/bench.c $(pkg-config --cflags --libs libdpdk)
cargo build --release -q -p fusebox
summary=""
for set in "${sets[@]}"; do
  name="$(basename "$(dirname "$set")")/$(basename "$set")"
  if [ -f "${set}_trace" ]; then
    headers=(--trace "${set}_trace"); what="its trace"
  else
    headers=(--draw "$draw" --seed 1); what="$draw drawn headers"
  fi
  echo "== $name ($what)"
  out="$(target/release/fusebox classify --rules "$set" "${headers[@]}" --passes "$passes" \
    --rte-acl target/rte-acl-bench --rounds "$rounds" 2>&1 >/dev/null)" || {
    echo "$out"; echo "$name: failed (answers differ or the harness failed)"; exit 1; }
  echo "$out"
  summary+="$name: $(echo "$out" | sed -n 's/^rte-acl: FuseBox ÷ best SIMD[^:]*: //p')"$'\n'
done
echo "== FuseBox ÷ rte_acl best SIMD (median of $rounds rounds, range)"
printf '%s' "$summary"
