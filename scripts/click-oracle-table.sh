#!/usr/bin/env bash
# The Click oracle table (docs/click-oracle.md): every example configuration Click can run,
# every golden case and a few of Click's own conf/ configurations, through real Click and
# `fusebox run`, on traces from `fusebox gen` with every anomaly. Prints Markdown rows.
#
# Not in CI: Click is not packaged. Build it first from a snapshot of kohler/click:
#     scripts/click-oracle.py build-click /tmp/click-src
# then:
#     CLICK=/tmp/click-src/userlevel/click CLICK_CONF=/tmp/click-src/conf \
#         scripts/click-oracle-table.sh > /tmp/oracle-rows.md
# (FUSEBOX defaults to target/release/fusebox; build it with `cargo build --release -p fusebox`.)
set -u
cd "$(dirname "$0")/.."
: "${CLICK:?set CLICK to the userlevel click binary (see the header of this script)}"
FUSEBOX=${FUSEBOX:-target/release/fusebox}
CLICK_CONF=${CLICK_CONF:-}
ORACLE="python3 scripts/click-oracle.py compare --click $CLICK --fusebox $FUSEBOX"
T=$(mktemp -d /tmp/click-oracle-traces.XXXXXX)
trap 'rm -rf "$T"' EXIT

# Trace kinds: name and the anomaly flags of `fusebox gen`.
KINDS=(plain ttl badsum ipopts arp trunc short all)
declare -A FLAGS=(
    [plain]=""
    [ttl]="--ttl 1-12"
    [badsum]="--bad-ip-checksum 10%"
    [ipopts]="--ip-options 25%"
    [arp]="--arp 10%"
    [trunc]="--truncate 10%"
    [short]="--short-transport 30%"
    [all]="--ttl 1-12 --bad-ip-checksum 10% --ip-options 25% --arp 10% --truncate 10%"
)
BASE="-n 300 --flows 30 --mix tcp=1,udp=1,icmp=1 --size imix --seed 7"

# gen NAME ADDRESS-FLAGS KIND -> path of the trace
gen() {
    local f="$T/$1-$3.pcap"
    # shellcheck disable=SC2086
    [ -e "$f" ] || "$FUSEBOX" gen -o "$f" $BASE $2 ${FLAGS[$3]} >/dev/null 2>&1
    echo "$f"
}

row() { # CONFIG TRACE-LABEL TRACE [oracle args...]
    local cfg=$1 label=$2 trace=$3
    shift 3
    local out verdict reason
    out=$($ORACLE "$cfg" --trace "$trace" "$@" 2>&1)
    verdict=$(echo "$out" | head -n1)
    reason=$(echo "$out" | sed -n 2p)
    echo "| \`$cfg\` | $label | $verdict | $reason |"
    if [[ $verdict == different* || $verdict == error* ]]; then
        { echo "== $cfg $label"; echo "$out"; } >>/tmp/click-oracle-details.txt
    fi
}

: >/tmp/click-oracle-details.txt
echo "| configuration | trace | result | detail |"
echo "|---|---|---|---|"

# Examples: configuration, input interface, address flags for gen.
EXAMPLES=(
    "examples/ttl/ttl.click|eth0|"
    "examples/routers/router.click|eth0|--dst 10.0.0.0/14"
    "examples/napts/napt.click|eth0|--src 10.0.0.0/16 --dst 198.51.100.0/24"
    "examples/fig5/napt.click|eth0|--src 192.168.0.0/24 --dst 10.0.0.0/15"
    "examples/fig5/fw.click|eth0|--src 10.0.0.1/32 --dport 1234,80"
    "examples/fig5/lb.click|eth0|"
    "examples/click-router/router.click|eth0|--src 18.26.4.0/24 --dst 1.0.0.0/8"
)
for e in "${EXAMPLES[@]}"; do
    IFS='|' read -r cfg iface addr <<<"$e"
    name=$(echo "$cfg" | tr '/.' '__')
    for k in "${KINDS[@]}"; do
        row "$cfg" "gen $k" "$(gen "$name" "$addr" "$k")" --in "$iface"
    done
done

# The Click router's forwarding path after ARP: the same traces, each with the ARP replies
# of its destinations arriving first on eth1, merged into one capture that is split by
# destination MAC between eth0 and eth1 (so Click reads one FromDump, in order).
cfg=examples/click-router/router.click
for k in "${KINDS[@]}"; do
    t=$(gen examples_click-router_router_click "--src 18.26.4.0/24 --dst 1.0.0.0/8" "$k")
    scripts/click-oracle.py arp-replies "$t" "${t%.pcap}-arp.pcap" \
        --to 00:00:c0:ca:68:ef,1.0.0.1 --net 1.0.0.0/8 >/dev/null
    row "$cfg" "gen $k + ARP replies on eth1" "${t%.pcap}-arp.pcap" \
        --split eth0=00:00:c0:ae:67:ef --split eth1=00:00:c0:ca:68:ef
done

# Golden cases: each on its own input.pcap, and on a trace with every anomaly.
for d in crates/fusebox/tests/golden/*/; do
    cfg="${d}config.click"
    extra=()
    case "$d" in
    *ip_lookupiproute_legacy/)
        echo "| \`$cfg\` | - | not run | Click no longer has LookupIPRoute (FuseBox keeps the legacy name) |"
        continue
        ;;
    *arp_querier/)
        # STATIC is FuseBox's keyword, and Click wants ARPQuerier's input 1 connected:
        # compare a copy without STATIC, Click's copy with an Idle on input 1, in real time.
        mkdir -p "$T/arpq"
        cp "$d"* "$T/arpq/"
        sed -i 's/, STATIC 10.0.0.2 00:00:00:00:00:0b//' "$T/arpq/config.click"
        cfg="$T/arpq/config.click"
        extra=(--click-extra 'Idle -> [1]q;' --timing)
        ;;
    esac
    row "$cfg" "input.pcap" "${d}input.pcap" "${extra[@]}"
    row "$cfg" "gen all" "$(gen golden "--dst 10.0.0.0/22" all)" "${extra[@]}"
    # The rewriters also on TCP/UDP packets cut around their 8- and 18-byte thresholds.
    case "$d" in
    *rewriter*) row "$cfg" "gen short" "$(gen golden "--dst 10.0.0.0/22" short)" ;;
    esac
    # The checksum setters are meant for their protocol only (Click does not check it).
    case "$d" in
    *setchecksum_tcp/) proto=tcp ;;
    *setchecksum_udp/) proto=udp ;;
    *) proto= ;;
    esac
    if [ -n "$proto" ]; then
        row "$cfg" "gen plain --filter $proto" "$(gen "golden-$proto" "--dst 10.0.0.0/22 --filter $proto" plain)"
        row "$cfg" "gen all --filter $proto" "$(gen "golden-$proto" "--dst 10.0.0.0/22 --filter $proto" all)"
    fi
done

# Click's own conf/ configurations that use only elements FuseBox has.
if [ -n "$CLICK_CONF" ]; then
    for k in plain arp; do
        row "$CLICK_CONF/udpcount.click" "gen $k" "$(gen udpcount "--dst 1.0.0.1/32 --dport 1234,80" "$k")" --in the_interface
        row "$CLICK_CONF/print-pings.click" "gen $k" "$(gen pings "" "$k")" --in eth1
        row "$CLICK_CONF/test-device.click" "gen $k" "$(gen dev "" "$k")" --in eth0
    done
fi
