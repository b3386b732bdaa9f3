#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, see docs/fuzzing.md) for a while and prints, per target,
# the executions, executions per second, corpus size and findings (files libFuzzer wrote
# to fuzz/artifacts/TARGET/ during this run).
#
#   scripts/fuzz-all.sh MINUTES [TARGET...]    e.g. `scripts/fuzz-all.sh 10`
#   scripts/fuzz-all.sh 20s [TARGET...]        seconds (what CI runs)
#
# FUZZ_JOBS=N runs N targets at once (default 1; each target is one process). The corpora
# are seeded by fuzz/seed.sh when fuzz/corpus/TARGET does not exist yet. Needs cargo-fuzz
# (`cargo install cargo-fuzz`) and a C++ compiler (libFuzzer is built from source); runs on
# the stable toolchain without a sanitizer (`-s none`). Exits 1 when a target found
# something (a panic, a mismatch between modes, a timeout or running out of memory).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/fuzz-all.sh MINUTES|SECONDSs [TARGET...]" >&2
  exit 2
fi
case $1 in
  *s) SECS=${1%s};;
  *) SECS=$(( $1 * 60 ));;
esac
shift
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(pcap wire click chain_file filter classbench snort chains)
JOBS=${FUZZ_JOBS:-1}
command -v cargo-fuzz >/dev/null || { echo "fuzz-all.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }
missing=()
for t in "${TARGETS[@]}"; do [ -d "fuzz/corpus/$t" ] || missing+=("$t"); done
[ ${#missing[@]} -eq 0 ] || fuzz/seed.sh "${missing[@]}"
cargo fuzz build -s none
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT

# Findings: what libFuzzer writes for a panic, a timeout, running out of memory or a leak
# (not slow-unit-* files).
found() { find "fuzz/artifacts/$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l; }

one() {
  local t=$1 before
  mkdir -p "fuzz/artifacts/$t"
  before=$(found "$t")
  # -timeout: one input running longer is a finding; -rss_limit_mb: so is memory.
  cargo fuzz run -s none "$t" "fuzz/corpus/$t" -- -max_total_time="$SECS" \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 >"$LOGS/$t.log" 2>&1 || true
  echo "$before" >"$LOGS/$t.before"
}

running=0
for t in "${TARGETS[@]}"; do
  one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
printf '%-12s %12s %8s %8s %9s\n' target executions exec/s corpus findings
for t in "${TARGETS[@]}"; do
  log=$LOGS/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  rate=$(grep -Eo 'stat::average_exec_per_sec: +[0-9]+' "$log" | tail -1 | awk '{print $2}')
  corpus=$(grep -Eo 'corp: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  new=$(( $(found "$t") - $(cat "$LOGS/$t.before") ))
  printf '%-12s %12s %8s %8s %9s\n' "$t" "${execs:-?}" "${rate:-?}" "${corpus:-?}" "$new"
  if [ "$new" -gt 0 ] || [ -z "$execs" ]; then
    status=1
    echo "--- $t: the end of libFuzzer's output:"
    tail -n 40 "$log"
    ls -1t "fuzz/artifacts/$t" | head -n "$new" | sed 's|^|  found: fuzz/artifacts/'"$t"'/|'
  fi
done
exit $status
