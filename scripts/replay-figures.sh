#!/usr/bin/env bash
# In-memory replay figures (one core, no I/O) for the README / closing notes:
# one router, ten routers, one NAPT, ten NAPTs, 64-byte frames. Each figure is run REPS
# times; min / median / max Mpps are printed. The machine is shared and noisy: compare
# ratios taken in the same run, not absolute numbers across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
PASSES=${PASSES:-20}
cargo build --release --bin fusebox -q
FB=target/release/fusebox
t=$(mktemp -d)
$FB gen -o "$t/t64.pcap" --packets 100000 --flows 1000 --mix udp=1 --size 64 \
    --src 10.0.0.0/16 --dst 10.1.0.0/16 --seed 1 2>/dev/null
declare -A MED
run() { # name chain entry mode
  local vals=()
  for _ in $(seq "$REPS"); do
    vals+=("$($FB run "$2" --input "$3=$t/t64.pcap" --replay "$PASSES" --json --out-dir "$t" --mode "$4" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["replay"]["pps"]/1e6)')")
  done
  MED["$1"]=$(printf '%s\n' "${vals[@]}" | sort -g | python3 -c "
import sys; v=[float(x) for x in sys.stdin]; print(v[len(v)//2])")
  printf '%s\n' "${vals[@]}" | sort -g | python3 -c "
import sys; v=[float(x) for x in sys.stdin]; n=len(v)
print(f'$1 ($4): min {v[0]:.2f}  median {v[n//2]:.2f}  max {v[-1]:.2f} Mpps  ({n} runs x $PASSES passes x 100k packets)')"
}
# Interleaved so that the machine's load drifts over all of them alike.
run "1 router  " examples/routers/one.toml r1.eth0 naive
run "10 routers" examples/routers/chain.toml r1.eth0 naive
run "10 routers synth" examples/routers/chain.toml r1.eth0 synth
run "1 NAPT    " examples/napts/one.toml n1.eth0 naive
run "10 NAPTs  " examples/napts/chain.toml n1.eth0 naive
run "10 NAPTs synth" examples/napts/chain.toml n1.eth0 synth
python3 -c "
r=${MED["10 routers synth"]}/${MED["1 router  "]}; n=${MED["10 NAPTs synth"]}/${MED["1 NAPT    "]}
print(f'synthesized 10 routers / naive 1 router: {r:.2f}   synthesized 10 NAPTs / naive 1 NAPT: {n:.2f}  (medians)')"

rm -rf "$t"
