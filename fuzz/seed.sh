#!/usr/bin/env bash
# Fills fuzz/corpus/TARGET with seed inputs for every fuzz target (see docs/fuzzing.md):
# the repository's own examples and golden configurations, the small seeds committed in
# fuzz/seeds/TARGET, and the public test data of ../shared/data (or $FUSEBOX_DATA), read at
# run time and never committed: captures, ClassBench filter sets, Snort rules, tcpdump
# filter expressions. Captures become frames and chain inputs with the `fuzz-seeds` tool
# (crates/fuzzing). Without the shared data the corpora get the repository's seeds only.
# Usage: fuzz/seed.sh [TARGET...]   (all targets by default)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=${FUSEBOX_DATA:-$ROOT/../shared/data}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(pcap wire click chain_file filter classbench snort chains)
if [ ! -d "$DATA" ]; then
  echo "seed.sh: no shared data at $DATA: seeding from the repository only" >&2
  DATA=""
fi
cargo build --release -q -p fuzzing --bin fuzz-seeds
SEEDS=$ROOT/target/release/fuzz-seeds
# Captures: small ones whole, the first records of the others (Ethernet only for frames).
CAPS=()
if [ -n "$DATA" ]; then
  while IFS= read -r f; do CAPS+=("$f"); done < <(
    find "$DATA/pcaps" -type f \( -name '*.pcap' -o -name '*.pcapng' \) | sort)
fi
# A few captures of every kind for the targets that need frames, not every one.
FEW=()
for f in "${CAPS[@]}"; do
  case $f in
    */zeek-traces/*|*/deepflow-tunnels/*|*/nsh/*|*/tcpreplay/*|*/ndpi/*|*/libpcap-filter-tests/filter/*) FEW+=("$f");;
  esac
done
# Generated traces with every anomaly `fusebox gen` knows (when the binary is built;
# FUSEBOX_BIN names another one).
GEN=${FUSEBOX_BIN:-$ROOT/target/release/fusebox}
if [ -x "$GEN" ]; then
  G=$(mktemp -d)
  trap 'rm -rf "$G"' EXIT
  "$GEN" gen -o "$G/anomalies.pcap" --packets 40 --flows 8 --mix tcp=2,udp=2,icmp=1 \
    --ttl 1-4 --bad-ip-checksum 0.1 --ip-options 0.2 --arp 0.1 --truncate 0.1 >/dev/null
  "$GEN" gen -o "$G/isp.pcap" --packets 40 --flows 10 --mix tcp=2,udp=2,icmp=1 \
    --src 10.0.0.0/16 --dst 10.1.0.0/16 --dport 80,443,53,23,1234,8080 >/dev/null
  FEW+=("$G/anomalies.pcap" "$G/isp.pcap")
fi

for t in "${TARGETS[@]}"; do
  out=fuzz/corpus/$t
  mkdir -p "$out"
  if [ -d "fuzz/seeds/$t" ]; then cp fuzz/seeds/$t/* "$out/" 2>/dev/null || true; fi
  case $t in
    pcap)
      for f in "${CAPS[@]}"; do
        head -c 4096 "$f" > "$out/$(basename "$f")-$(echo "$f" | cksum | cut -d' ' -f1)"
      done;;
    wire)
      [ ${#FEW[@]} -eq 0 ] || "$SEEDS" frames "$out" 20 "${FEW[@]}";;
    click)
      find examples crates/fusebox/tests/golden -name '*.click' | while IFS= read -r f; do
        cp "$f" "$out/$(echo "$f" | tr / _)"
      done;;
    chain_file)
      find examples -name '*.toml' | while IFS= read -r f; do
        cp "$f" "$out/$(echo "$f" | tr / _)"
      done;;
    filter)
      # IPFilter rules (00), IPClassifier patterns (01), tcpdump expressions (02),
      # Classifier patterns (03); second byte: outputs and annotations (network header at 14).
      "$SEEDS" pair "$out" 0000 examples/isp/acl.rules 100 "${FEW[@]}"
      [ ! -d fuzz/seeds/filter-texts ] || for k in 01 02 03; do
        [ ! -f fuzz/seeds/filter-texts/$k ] || "$SEEDS" pair "$out" ${k}20 fuzz/seeds/filter-texts/$k 100 "${FEW[@]}"
      done
      if [ -n "$DATA" ]; then
        "$SEEDS" pair "$out" 0200 "$DATA/filter-oracle/generated-libpcap-1.10.3/expressions.txt" 100 "${FEW[@]}"
      fi;;
    classbench)
      if [ -n "$DATA" ]; then
        for f in "$DATA"/classbench/neurocuts/*_1k "$DATA"/classbench/cutsplit/*_1k; do
          head -c 6000 "$f" | sed '$d' > "$out/$(basename "$f")"
        done
        for f in "$DATA"/classbench/cutsplit/*_trace; do
          head -n 40 "$f" > "$out/$(basename "$f")"
        done
      fi;;
    snort)
      cp examples/speedybox/*.rules "$out/" 2>/dev/null || true
      if [ -n "$DATA" ]; then
        web=$(find "$DATA/pcaps/ndpi" -name 'WebattackRCE.pcap' | head -1)
        "$SEEDS" pair "$out" "" "$DATA/ids/snort-community-rules/community-simple-content.rules" 300 $web
        mapfile -t rules < <(find "$DATA/ids/suricata-verify-subset/tests" -name test.rules | sort)
        for f in "${rules[@]:0:60}"; do
          cp "$f" "$out/$(echo "$f" | cksum | cut -d' ' -f1).rules"
        done
      fi;;
    chains)
      "$SEEDS" golden "$out" 16
      [ ${#FEW[@]} -eq 0 ] || "$SEEDS" chains "$out" 12 "${FEW[@]}";;
    *) echo "seed.sh: unknown target $t" >&2; exit 2;;
  esac
  echo "seed.sh: $t: $(ls "$out" | wc -l) inputs in $out"
done
