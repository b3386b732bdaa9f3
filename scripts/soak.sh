#!/usr/bin/env bash
# Soak test (not in CI): ten million new flows through the ISP chain (examples/isp:
# firewall -> router -> NAPT, replies reflected back through all three) in every mode,
# sampling the process's resident memory (VmRSS) every half second. Shows that memory stays
# flat once the per-flow tables (NAT mappings, synth's established flows, the fast path's
# flow table) have filled to their bounds: see docs/bounded-state.md.
#
#   bash scripts/soak.sh                 # 10M flows, naive synth fastpath
#   FLOWS=1000000 MODES="naive" bash scripts/soak.sh
#   FLOWS=2000000 TAG=soak-speedybox1 CHAIN=examples/speedybox/chain1.toml ENTRY=nat.eth0 \
#       REFLECT=bl.eth1 EXITS="nat.eth0 bl.eth1" bash scripts/soak.sh
#
# Settings (environment): FLOWS (default 10000000; one packet each, every packet a new
# flow: half TCP SYNs, half UDP, to ports 80,443,53,1234, so the ACL lets half through to
# the NAPT), GAP_NS (virtual time between packets, default 20000: 200 s for 10M packets, so
# the NAPT's 5 s guarantee covers fewer flows than its capacity and full tables evict),
# MODES (default "naive synth fastpath"), WORK (scratch folder for the trace and logs,
# default /tmp/fusebox-soak), OUT (where the CSV, table and plot go, default docs/),
# FUSEBOX (the binary; default: built here with cargo build --release -p fusebox),
# CHAIN, ENTRY, REFLECT (empty: none) and EXITS (written to /dev/null) to soak another chain
# (default the ISP chain: fw.eth0, napt.eth1, "fw.eth0 napt.eth1"), TAG (the output files'
# name, default soak),
# REPORT_ONLY=1 (no runs: the report from OUT/soak.csv and the logs in WORK).
# Everything runs under `nice -n 10`. The trace (FLOWS x 76 bytes) is generated once and kept in
# WORK; outputs go to /dev/null.
#
# Writes OUT/TAG.csv (mode, seconds, packets in, RSS in KiB), OUT/TAG.md (RSS at every
# million packets per mode, and each run's table counters) and OUT/TAG.svg (RSS over
# packets, one line per mode).
set -euo pipefail
cd "$(dirname "$0")/.."
FLOWS=${FLOWS:-10000000}
GAP_NS=${GAP_NS:-20000}
MODES=${MODES:-naive synth fastpath}
WORK=${WORK:-/tmp/fusebox-soak}
OUT=${OUT:-docs}
CHAIN=${CHAIN:-examples/isp/chain.toml}
ENTRY=${ENTRY:-fw.eth0}
REFLECT=${REFLECT-napt.eth1}
EXITS=${EXITS:-fw.eth0 napt.eth1}
TAG=${TAG:-soak}
mkdir -p "$WORK" "$OUT"
if [ -z "${FUSEBOX:-}" ] && [ -z "${REPORT_ONLY:-}" ]; then
    nice -n 10 cargo build --release -p fusebox >&2
    FUSEBOX=target/release/fusebox
fi
TRACE="$WORK/flows-$FLOWS-$GAP_NS.pcap"
if [ ! -s "$TRACE" ] && [ -z "${REPORT_ONLY:-}" ]; then
    echo "soak: generating $FLOWS new flows into $TRACE" >&2
    nice -n 10 "$FUSEBOX" gen -o "$TRACE.part" --packets "$FLOWS" --flows "$FLOWS" \
        --mix tcp=1,udp=1 --src 10.0.0.0/16 --dst 10.1.0.0/16 --dport 80,443,53,1234 \
        --gap-ns "$GAP_NS" >&2
    mv "$TRACE.part" "$TRACE"
fi

CSV="$OUT/$TAG.csv"
args=(--input "$ENTRY=$TRACE")
for e in $EXITS; do args+=(--output "$e=/dev/null"); done
[ -z "$REFLECT" ] || args+=(--reflect "$REFLECT")
[ -n "${REPORT_ONLY:-}" ] || echo "mode,seconds,packets_in,rss_kib" > "$CSV"
for mode in $MODES; do
    [ -z "${REPORT_ONLY:-}" ] || break
    log="$WORK/$TAG-$mode.log"
    echo "soak: $mode" >&2
    start=$(date +%s.%N)
    nice -n 10 "$FUSEBOX" run "$CHAIN" "${args[@]}" --mode "$mode" --progress lines 2> "$log" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        # The packets read so far: the last progress line's "N in".
        seen=$(grep -o '| [0-9]* in' "$log" 2>/dev/null | tail -1 | tr -dc '0-9' || true)
        now=$(date +%s.%N)
        if [ -n "$rss" ]; then
            echo "$mode,$(echo "$now - $start" | bc),${seen:-0},$rss" >> "$CSV"
        fi
        sleep 0.5
    done
    if ! wait "$pid"; then
        echo "soak: $mode run failed; see $log" >&2
        exit 1
    fi
    total=$(grep -o '^chain: [0-9]* in' "$log" | tr -dc '0-9' || true)
    echo "soak: $mode done: ${total:-?} packets" >&2
    # The last sample: every packet read.
    rss=$(tail -1 "$CSV" | cut -d, -f4)
    echo "$mode,$(echo "$(date +%s.%N) - $start" | bc),${total:-0},$rss" >> "$CSV"
done

python3 - "$CSV" "$OUT" "$WORK" "$FLOWS" "$TAG" "$CHAIN" $MODES <<'EOF'
import csv, sys, re, os
path, out, work, flows, tag, chain = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
modes = sys.argv[7:]
rows = {m: [] for m in modes}
for r in csv.DictReader(open(path)):
    rows[r["mode"]].append((float(r["seconds"]), int(r["packets_in"]), int(r["rss_kib"])))
step = 1_000_000 if flows >= 2_000_000 else max(flows // 10, 1)
marks = list(range(step, flows + 1, step))

def rss_at(samples, n):
    # The first sample at or after n packets read (else the last sample).
    for s in samples:
        if s[1] >= n:
            return s[2]
    return samples[-1][2] if samples else 0

md = ["# Soak: RSS (MiB) after each million new flows, per mode", "",
      f"{flows} packets, every one a new flow, through {chain}; "
      "`scripts/soak.sh`. A cell is the first sample (every 0.5 s) at or after that many "
      "packets read.", ""]
md.append("| packets read | " + " | ".join(modes) + " |")
md.append("|---:|" + "---:|" * len(modes))
for n in marks:
    md.append(f"| {n:,} | " + " | ".join(f"{rss_at(rows[m], n) / 1024:.0f}" for m in modes) + " |")
md.append("| peak | " + " | ".join(f"{max((s[2] for s in rows[m]), default=0) / 1024:.0f}" for m in modes) + " |")
md.append("| seconds | " + " | ".join(f"{rows[m][-1][0]:.0f}" if rows[m] else "-" for m in modes) + " |")
md.append("")
md.append("Table counters at the end of each run:")
md.append("")
for m in modes:
    log = open(os.path.join(work, f"{tag}-{m}.log")).read()
    md.append(f"* {m}:")
    # The elements that keep per-flow tables, with their counters.
    for el in re.finditer(r"^\s*\S+\s+(IPRewriter|MazuNAT|Maglev|Monitor|SnortIDS)\s.*$", log, re.M):
        md.append("  `" + re.sub(r"\s+", " ", el.group(0).strip()) + "`")
    for line in log.splitlines():
        if line.startswith(("fastpath:", "chain:")):
            md.append(f"  `{line.strip()}`")
open(os.path.join(out, tag + ".md"), "w").write("\n".join(md) + "\n")

# The plot: RSS (MiB) over packets read, one polyline per mode.
W, H, L, B = 720, 360, 60, 40
top = max((s[2] for m in modes for s in rows[m]), default=1) / 1024 * 1.1
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="16" text-anchor="middle" font-size="13">RSS over {flows:,} new flows ({chain})</text>']
pw, ph = W - L - 20, H - B - 30
def X(n): return L + pw * n / max(flows, 1)
def Y(mib): return 30 + ph - ph * mib / top
svg.append(f'<line x1="{L}" y1="{30+ph}" x2="{L+pw}" y2="{30+ph}" stroke="black"/>')
svg.append(f'<line x1="{L}" y1="30" x2="{L}" y2="{30+ph}" stroke="black"/>')
for n in marks:
    svg.append(f'<text x="{X(n):.1f}" y="{30+ph+14}" text-anchor="middle">{n/1e6:g}M</text>')
for k in range(0, 6):
    v = top / 5 * k
    svg.append(f'<text x="{L-6}" y="{Y(v)+4:.1f}" text-anchor="end">{v:.0f}</text>')
    svg.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{L+pw}" y2="{Y(v):.1f}" stroke="#ddd"/>')
svg.append(f'<text x="14" y="{30+ph/2}" transform="rotate(-90 14 {30+ph/2})" text-anchor="middle">RSS (MiB)</text>')
svg.append(f'<text x="{L+pw/2}" y="{H-6}" text-anchor="middle">packets read (each a new flow)</text>')
for i, m in enumerate(modes):
    pts = " ".join(f"{X(s[1]):.1f},{Y(s[2]/1024):.1f}" for s in rows[m] if s[1] > 0)
    c = colors[i % len(colors)]
    svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
    svg.append(f'<text x="{L+pw-80}" y="{50+14*i}" fill="{c}">{m}</text>')
svg.append("</svg>")
open(os.path.join(out, tag + ".svg"), "w").write("\n".join(svg) + "\n")
print(open(os.path.join(out, tag + ".md")).read())
EOF
