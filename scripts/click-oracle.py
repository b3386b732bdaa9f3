#!/usr/bin/env python3
"""Click oracle: run a Click configuration through real Click (kohler/click, userlevel) and
through `fusebox run` on the same pcap, and compare every output packet by packet.

Not part of CI: Click is not packaged. Build it from a snapshot of kohler/click first:

    scripts/click-oracle.py build-click /path/to/click-source     # configure + make, userlevel only
    # (= ./configure --enable-userlevel --disable-linuxmodule --disable-dpdk && make -j2;
    #  the binary is then /path/to/click-source/userlevel/click)

Then compare one configuration on one trace:

    scripts/click-oracle.py compare examples/ttl/ttl.click --trace t.pcap \
        --click /path/to/click-source/userlevel/click [--in eth0] [-D NAME=VALUE]

Several interfaces at once: one merged capture, split by destination MAC (Click reads it
through one FromDump and a Classifier, FuseBox as one capture per interface):

    scripts/click-oracle.py arp-replies t.pcap t-arp.pcap --to 00:00:c0:ca:68:ef,1.0.0.1 \
        --net 1.0.0.0/8          # the ARP replies of t's destinations, first, to that interface
    scripts/click-oracle.py compare examples/click-router/router.click --trace t-arp.pcap \
        --split eth0=00:00:c0:ae:67:ef --split eth1=00:00:c0:ca:68:ef --click ...

How it runs both:
  * Click gets a rewritten copy of the configuration: `FromDevice(X)` / `PollDevice(X)` become
    `FromDump(in-X.pcap, STOP true)` for the input interface (the trace; followed, as
    FromDevice does, by marking broadcast and multicast frames in the packet-type annotation)
    and `Idle` for the others; `ToDevice(X)` becomes `ToDump(out-X.pcap)`. Configurations that already read
    `FromDump(F)` get `STOP true` added. A `DriverManager(pause, wait 0.2s, stop)` lets queued
    packets drain after the trace ends. FromDump keeps the trace's timestamps (TIMING false
    is the default: no pacing), ToDump writes them.
    `ToHost` (a Linux-module element) becomes `ToDump(out-host.pcap)`, FuseBox's `host` exit.
  * FuseBox runs the original file: `fusebox run CONFIG --input X=trace --output Y=out-Y.pcap`
    (or, for FromDump/ToDump configurations, in a scratch copy of the configuration's folder).

How outputs are compared, per output file and packet by packet:
  * identical: same bytes (and the same timestamps);
  * identical modulo a bijection: the packets differ only in values Click draws itself — TCP/UDP
    ports and ICMP echo identifiers a rewriter picks (`ports`), IP identifiers of packets an
    element creates (`ip-id`) — with the transport/IP checksums following; the map from Click's
    value to FuseBox's (keyed by protocol and address) must be the same function for every
    packet, and one-to-one;
  * timestamps differ (Click stamps packets it creates, e.g. ICMP errors, with the wall clock)
    is reported apart from byte differences;
  * different: anything else; the first differing packets are printed decoded by tcpdump.

Exit status: 0 identical (possibly modulo), 4 different, 1 error.
"""

import argparse
import copy
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

DRIVER = "DriverManager(pause, wait 0.2s, stop);\n"
# Click's FromDevice (pcap mode) marks frames to a broadcast or multicast MAC address in the
# packet-type annotation (DropBroadcasts and ICMPError read it); FromDump does not, so the
# rewritten input does it with a Classifier and SetPacketType.
FROM_DEVICE = """elementclass OracleFromDevice { $file |
  FromDump($file, STOP true@TIMING@) -> oracle_c :: Classifier(0/ffffffffffff, 0/01%01, -);
  oracle_c[0] -> SetPacketType(BROADCAST) -> output;
  oracle_c[1] -> SetPacketType(MULTICAST) -> output;
  oracle_c[2] -> output }
"""


def read_pcap(path):
    """Packets of a pcap file as (seconds, nanoseconds, bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise SystemExit(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    out = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(end + "IIII", data[off : off + 16])
        off += 16
        pkt = data[off : off + incl]
        off += incl
        out.append((sec, frac if nano else frac * 1000, pkt))
    return out


def write_pcap(path, pkts):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for sec, ns, p in pkts:
            f.write(struct.pack("<IIII", sec, ns // 1000, len(p), len(p)))
            f.write(p)


def csum_adjust(old_sum, old_word, new_word):
    """RFC 1624 incremental update of a 16-bit one's complement checksum."""
    s = (~old_sum & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_offset(p):
    """Offset of the IPv4 header in an Ethernet frame (or 0 for a raw IP packet), or None."""
    if len(p) >= 34 and p[12:14] == b"\x08\x00" and p[14] >> 4 == 4:
        return 14
    if len(p) >= 20 and p[0] >> 4 == 4 and p[0] & 15 >= 5:
        return 0
    return None


class Bijection:
    """A map from Click's values to FuseBox's that must stay a one-to-one function."""

    def __init__(self, name):
        self.name = name
        self.fwd = {}
        self.back = {}
        self.used = False

    def add(self, key_c, key_f):
        if self.fwd.get(key_c, key_f) != key_f or self.back.get(key_f, key_c) != key_c:
            return False
        self.fwd[key_c] = key_f
        self.back[key_f] = key_c
        if key_c != key_f:
            self.used = True
        return True


def try_modulo(c, f, maps):
    """Rewrite Click's packet `c` with the bijections so that it can equal FuseBox's `f`.
    Returns the rewritten packet, or None when the difference is not of that kind."""
    if len(c) != len(f):
        return None
    o = ip_offset(c)
    if o is None or ip_offset(f) != o:
        return None
    c = bytearray(c)
    ihl = (c[o] & 15) * 4
    proto = c[o + 9]
    src, dst = bytes(c[o + 12 : o + 16]), bytes(c[o + 16 : o + 20])
    frag = struct.unpack(">H", c[o + 6 : o + 8])[0] & 0x1FFF
    # IP identifier (packets an element creates: ICMP errors, fragments of DF packets)
    cid = c[o + 4 : o + 6]
    fid = f[o + 4 : o + 6]
    if cid != fid:
        if not maps["ip-id"].add((src, bytes(cid)), (src, bytes(fid))):
            return None
        old = struct.unpack(">H", cid)[0]
        new = struct.unpack(">H", fid)[0]
        c[o + 4 : o + 6] = fid
        s = struct.unpack(">H", c[o + 10 : o + 12])[0]
        c[o + 10 : o + 12] = struct.pack(">H", csum_adjust(s, old, new))
    t = o + ihl
    if frag == 0 and proto in (6, 17) and len(c) >= t + 8:
        cs = 16 if proto == 6 else 6
        for i, addr in ((0, src), (2, dst)):
            cv, fv = bytes(c[t + i : t + i + 2]), bytes(f[t + i : t + i + 2])
            if cv == fv:
                continue
            if not maps["ports"].add((proto, addr, cv), (proto, addr, fv)):
                return None
            c[t + i : t + i + 2] = fv
            if len(c) >= t + cs + 2:
                s = struct.unpack(">H", c[t + cs : t + cs + 2])[0]
                if proto == 17 and s == 0:
                    continue
                n = csum_adjust(s, struct.unpack(">H", cv)[0], struct.unpack(">H", fv)[0])
                if proto == 17 and n == 0:
                    n = 0xFFFF
                c[t + cs : t + cs + 2] = struct.pack(">H", n)
    elif frag == 0 and proto == 1 and len(c) >= t + 8 and c[t] in (0, 8):
        cv, fv = bytes(c[t + 4 : t + 6]), bytes(f[t + 4 : t + 6])
        if cv != fv:
            key = src if c[t] == 8 else dst
            if not maps["ports"].add((1, key, cv), (1, key, fv)):
                return None
            c[t + 4 : t + 6] = fv
            s = struct.unpack(">H", c[t + 2 : t + 4])[0]
            n = csum_adjust(s, struct.unpack(">H", cv)[0], struct.unpack(">H", fv)[0])
            c[t + 2 : t + 4] = struct.pack(">H", n)
    return bytes(c)


def same(c, f, maps, commit):
    """Whether Click's packet equals FuseBox's, modulo the bijections. The bijections are
    extended only when `commit` and the packets do match."""
    if c == f:
        return True
    trial = copy.deepcopy(maps)
    m = try_modulo(c, f, trial)
    ok = m is not None and m == f
    if ok and commit:
        maps.update(trial)
    return ok


def selftest(_args):
    """Checks of the comparison itself (no Click needed)."""

    def pkt(sport, adj=None):
        ip = b"\x45\x00\x00\x1c\x00\x01\x00\x00\x40\x11\x00\x00\x0a\x00\x00\x01\x0a\x01\x01\x02"
        s = 0x1234 if adj is None else csum_adjust(0x1234, adj, sport)
        return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + struct.pack(">HHHH", sport, 80, 8, s)

    maps = {"ports": Bijection("ports"), "ip-id": Bijection("ip-id")}
    checks = [
        ("equal bytes", same(pkt(5), pkt(5), maps, True), True),
        ("wrong checksum", same(pkt(7000), pkt(2000), maps, True), False),
        ("a port mapped, checksum following", same(pkt(5000), pkt(1000, 5000), maps, True), True),
        ("the same mapping again", same(pkt(5000), pkt(1000, 5000), maps, True), True),
        ("not a function", same(pkt(5000), pkt(1001, 5000), maps, True), False),
        ("not one-to-one", same(pkt(6000), pkt(1000, 6000), maps, True), False),
        ("a failed try left no mapping", same(pkt(7000), pkt(2001, 7000), maps, True), True),
    ]
    bad = [name for name, got, want in checks if got != want]
    for name in bad:
        print(f"selftest failed: {name}")
    print("selftest ok" if not bad else "selftest FAILED")
    return 1 if bad else 0


def decode(pkt, ts, tmp):
    path = os.path.join(tmp, "decode.pcap")
    write_pcap(path, [(ts[0], ts[1], pkt)])
    link_raw = ip_offset(pkt) == 0
    if link_raw:  # rewrite link type to raw IP (101)
        with open(path, "r+b") as fh:
            fh.seek(20)
            fh.write(struct.pack("<I", 101))
    r = subprocess.run(["tcpdump", "-e", "-nn", "-vv", "-x", "-r", path], capture_output=True, text=True)
    return "    " + r.stdout.strip().replace("\n", "\n    ")


def compare_outputs(pairs, tmp, show=2):
    """pairs: [(name, click_pcap, fusebox_pcap)]. Returns (verdict, details)."""
    maps = {"ports": Bijection("ports"), "ip-id": Bijection("ip-id")}
    diffs = []
    ts_diffs = 0
    counts = []
    for name, cp, fp in pairs:
        cpk = read_pcap(cp) if os.path.exists(cp) else []
        fpk = read_pcap(fp) if os.path.exists(fp) else []
        counts.append(f"{name}:{len(cpk)}/{len(fpk)}")
        i = j = 0
        while i < len(cpk) or j < len(fpk):
            if i >= len(cpk) or j >= len(fpk):
                if i < len(cpk):
                    diffs.append((name, i, j, cpk[i], None, "only in Click"))
                    i += 1
                else:
                    diffs.append((name, i, j, None, fpk[j], "only in FuseBox"))
                    j += 1
                continue
            if same(cpk[i][2], fpk[j][2], maps, True):
                if (cpk[i][0], cpk[i][1] // 1000) != (fpk[j][0], fpk[j][1] // 1000):
                    ts_diffs += 1
                i += 1
                j += 1
                continue
            # resynchronise: a packet only one side wrote shifts the rest
            skip = None
            for d in range(1, 17):
                if i + d < len(cpk) and same(cpk[i + d][2], fpk[j][2], maps, False):
                    skip = ("c", d)
                    break
                if j + d < len(fpk) and same(cpk[i][2], fpk[j + d][2], maps, False):
                    skip = ("f", d)
                    break
            if skip and skip[0] == "c":
                for _ in range(skip[1]):
                    diffs.append((name, i, j, cpk[i], None, "only in Click"))
                    i += 1
            elif skip:
                for _ in range(skip[1]):
                    diffs.append((name, i, j, None, fpk[j], "only in FuseBox"))
                    j += 1
            else:
                diffs.append((name, i, j, cpk[i], fpk[j], "bytes differ"))
                i += 1
                j += 1
    lines = ["packets per output (click/fusebox): " + " ".join(counts)]
    used = [m.name for m in maps.values() if m.used]
    if diffs:
        verdict = "different"
        lines.append(f"{len(diffs)} differing packet(s); first:")
        kinds = {}
        for d in diffs:
            kinds[d[5]] = kinds.get(d[5], 0) + 1
        lines[0] += "; " + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
        for name, i, j, cp, fp, kind in diffs[:show]:
            lines.append(f"  {name} Click packet #{i} / FuseBox packet #{j}: {kind}")
            lines.append("   click:" + ("\n" + decode(cp[2], cp[:2], tmp) if cp else " (none)"))
            lines.append("   fusebox:" + ("\n" + decode(fp[2], fp[:2], tmp) if fp else " (none)"))
    elif used:
        verdict = "identical modulo " + "+".join(used)
        for m in maps.values():
            if m.used:
                lines.append(f"  {m.name}: {sum(1 for k, v in m.fwd.items() if k != v)} value(s) mapped, consistently")
    else:
        verdict = "identical"
    if ts_diffs:
        verdict += f" (timestamps differ on {ts_diffs} packet(s))"
    return verdict, lines


DEV_IN = re.compile(r"\b(FromDevice|PollDevice)\s*\(\s*([A-Za-z0-9_.:$-]+)[^()]*\)")
# A FromDevice with the name it is declared under, if any (for --split).
DEV_IN_NAMED = re.compile(
    r"(?:\b([A-Za-z_][A-Za-z0-9_@/]*)\s*::\s*)?\b(?:FromDevice|PollDevice)\s*\(\s*([A-Za-z0-9_.:$-]+)[^()]*\)"
)
DEV_OUT = re.compile(r"\bToDevice\s*\(\s*([A-Za-z0-9_.:$-]+)[^()]*\)")
TO_HOST = re.compile(r"\bToHost\b(\s*\([^()]*\))?")
DUMP_IN = re.compile(r"\bFromDump\s*\(([^()]*)\)")
DUMP_OUT = re.compile(r"\bToDump\s*\(\s*([^,()\s]+)[^()]*\)")


# ", TIMING true" with --timing: Click replays the trace at its own pace, so that its
# wall-clock timers (ARPQuerier's re-query limit, ...) see the trace's time.
TIMING = [""]


def rewrite_for_click(text, in_ifaces, split=None):
    """Click's copy of configuration `text`. With `split` ([(iface, mac)], the first the
    default), one merged capture `in-merged.pcap` feeds every split interface: a Classifier on
    the destination MAC sends each frame to the elements that followed that interface's
    FromDevice, frames to other addresses to the first interface's."""
    outs = sorted(set(DEV_OUT.findall(text)))
    ins = sorted(set(m[1] for m in DEV_IN.findall(text)))
    targets = {}
    decls = []

    def rsplit(m):
        name, dev = m.group(1), m.group(2)
        if dev not in dict(split):
            return m.group(0)
        if name:
            targets[dev] = name
            return f"{name} :: Null"
        targets[dev] = f"oracle_in_{dev}"
        decls.append(f"oracle_in_{dev} :: Null;")
        return f"oracle_in_{dev}"

    def rin(m):
        dev = m.group(2)
        if dev in in_ifaces:
            return f"OracleFromDevice(in-{dev}.pcap)"
        return "Idle"

    if split:
        text = DEV_IN_NAMED.sub(rsplit, text)
        pats = ", ".join("0/" + mac.replace(":", "").lower() for _, mac in split)
        # Click wants an element declared before a connection names it.
        text = "\n".join(decls) + "\n" + text
        lines = [
            f"oracle_split :: Classifier({pats}, -);",
            "OracleFromDevice(in-merged.pcap) -> oracle_split;",
        ]
        for i, (dev, _) in enumerate(split):
            if dev in targets:
                lines.append(f"oracle_split[{i}] -> {targets[dev]};")
            else:
                lines.append(f"oracle_split[{i}] -> Discard;")
        lines.append(f"oracle_split[{len(split)}] -> {targets.get(split[0][0], 'Discard')};")
        text = text + "\n" + "\n".join(lines) + "\n"
    text = DEV_IN.sub(rin, text)
    text = DEV_OUT.sub(lambda m: f"ToDump(out-{m.group(1)}.pcap)", text)
    # userlevel Click has no ToHost; FuseBox makes it an exit named `host`
    if TO_HOST.search(text):
        text = TO_HOST.sub("ToDump(out-host.pcap)", text)
        outs.append("host")

    def rdump(m):
        args = m.group(1)
        if re.search(r"\bSTOP\b", args):
            return m.group(0)
        return f"FromDump({args}, STOP true{TIMING[0]})"

    text = DUMP_IN.sub(rdump, text)
    if "OracleFromDevice" in text:
        text = FROM_DEVICE.replace("@TIMING@", TIMING[0]) + text
    if "DriverManager" not in text:
        text += "\n" + DRIVER
    return text, ins, outs


def compare(args):
    config = os.path.abspath(args.config)
    trace = os.path.abspath(args.trace)
    text = open(config).read()
    tmp = tempfile.mkdtemp(prefix="click-oracle-")
    try:
        cdir = os.path.join(tmp, "click")
        fdir = os.path.join(tmp, "fusebox")
        # scratch copies of the configuration's folder (for relative FromDump/ToDump files)
        for d in (cdir, fdir):
            os.makedirs(d)
            for e in os.listdir(os.path.dirname(config)):
                p = os.path.join(os.path.dirname(config), e)
                if os.path.isfile(p) and not e.startswith("out"):
                    shutil.copy(p, d)
        split = [tuple(x.split("=", 1)) for x in args.split or []]
        in_ifaces = [d for d, _ in split] if split else (args.inputs or ["eth0"])
        ctext, ins, outs = rewrite_for_click(text, [] if split else in_ifaces, split)
        dumps_out = sorted(set(DUMP_OUT.findall(text)))
        dumps_in = [a.split(",")[0].strip() for a in DUMP_IN.findall(text)]
        defines = []
        for d in args.define or []:
            defines.append(d)
        with open(os.path.join(cdir, "config.click"), "w") as fh:
            fh.write(ctext)
            for extra in args.click_extra or []:
                fh.write(extra + "\n")
        if split:
            # Click reads the merged capture; FuseBox one capture per interface, split by
            # destination MAC the same way (it merges its inputs on timestamps again).
            shutil.copy(trace, os.path.join(cdir, "in-merged.pcap"))
            macs = {bytes.fromhex(mac.replace(":", "")): dev for dev, mac in split}
            per = {dev: [] for dev, _ in split}
            for sec, ns, p in read_pcap(trace):
                per[macs.get(p[:6], split[0][0])].append((sec, ns, p))
            for dev, pkts in per.items():
                write_pcap(os.path.join(fdir, f"in-{dev}.pcap"), pkts)
        elif ins:
            for i in in_ifaces:
                shutil.copy(trace, os.path.join(cdir, f"in-{i}.pcap"))
                shutil.copy(trace, os.path.join(fdir, f"in-{i}.pcap"))
        else:
            for f in dumps_in:
                shutil.copy(trace, os.path.join(cdir, f))
                shutil.copy(trace, os.path.join(fdir, f))
        cmd = [args.click, "config.click"] + defines
        r = subprocess.run(cmd, cwd=cdir, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"error: click failed ({r.returncode}): {r.stderr.strip()[:2000]}")
            return 1
        shutil.copy(config, os.path.join(fdir, "config.click"))
        fcmd = [args.fusebox, "run", "config.click", "--quiet"]
        for d in defines:
            fcmd += ["-D", d]
        if ins:
            for i in in_ifaces:
                fcmd += ["--input", f"{i}=in-{i}.pcap"]
            for o in outs:
                fcmd += ["--output", f"{o}=out-{o}.pcap"]
        r = subprocess.run(fcmd, cwd=fdir, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(f"error: fusebox failed ({r.returncode}): {r.stderr.strip()[:2000]}")
            return 1
        if ins:
            pairs = [(f"out-{o}", os.path.join(cdir, f"out-{o}.pcap"), os.path.join(fdir, f"out-{o}.pcap")) for o in outs]
        else:
            pairs = [(o, os.path.join(cdir, o), os.path.join(fdir, o)) for o in dumps_out]
        verdict, lines = compare_outputs(pairs, tmp, args.show)
        print(verdict)
        for line in lines:
            print(line)
        if args.keep:
            print(f"kept: {tmp}")
        return 4 if verdict.startswith("different") else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def arp_replies(args):
    """Writes args.out: one ARP reply per distinct IPv4 destination of args.trace inside
    args.net ("IP is-at 02:aa:IP"), sent to args.to (MAC,IP), 1 µs apart and ending 1 µs
    before the trace's first packet, then the trace itself."""
    pkts = read_pcap(args.trace)
    mac, ip = args.to.split(",")
    to_mac = bytes.fromhex(mac.replace(":", ""))
    to_ip = bytes(int(x) for x in ip.split("."))
    net, plen = args.net.split("/")
    net = int.from_bytes(bytes(int(x) for x in net.split(".")), "big")
    mask = (0xFFFFFFFF << (32 - int(plen))) & 0xFFFFFFFF
    hosts = []
    for _, _, p in pkts:
        if len(p) >= 34 and p[12:14] == b"\x08\x00" and p[14] >> 4 == 4:
            d = p[30:34]
            if int.from_bytes(d, "big") & mask == net & mask and d not in hosts and d != to_ip:
                hosts.append(d)
    t0 = pkts[0][0] * 10**9 + pkts[0][1] if pkts else 10**9
    out = []
    for i, h in enumerate(hosts):
        hmac = b"\x02\xaa" + h
        arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2) + hmac + h + to_mac + to_ip
        t = t0 - (len(hosts) - i) * 1000
        out.append((t // 10**9, t % 10**9, to_mac + hmac + b"\x08\x06" + arp + bytes(18)))
    write_pcap(args.out, out + pkts)
    print(f"{len(hosts)} replies")
    return 0


def build_click(args):
    src = os.path.abspath(args.source)
    if not os.path.exists(os.path.join(src, "configure")):
        print(f"{src}: no ./configure here; check out kohler/click there first", file=sys.stderr)
        return 1
    subprocess.run(
        ["./configure", "--enable-userlevel", "--disable-linuxmodule", "--disable-dpdk"], cwd=src, check=True
    )
    subprocess.run(["make", f"-j{args.jobs}"], cwd=src, check=True)
    print(os.path.join(src, "userlevel", "click"))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-click", help="configure and build Click (userlevel) in a kohler/click checkout")
    b.add_argument("source")
    b.add_argument("--jobs", default="2")
    c = sub.add_parser("compare", help="run one configuration on one trace through Click and FuseBox")
    c.add_argument("config")
    c.add_argument("--trace", required=True)
    c.add_argument("--in", dest="inputs", action="append", help="input interface fed the trace (default eth0)")
    c.add_argument(
        "--split",
        action="append",
        help="IFACE=MAC: the trace is one merged capture; frames to MAC enter by IFACE (repeat; "
        "frames to other addresses enter by the first IFACE)",
    )
    c.add_argument("--click", default=os.environ.get("CLICK", "click"))
    c.add_argument("--fusebox", default=os.environ.get("FUSEBOX", "target/release/fusebox"))
    c.add_argument("-D", "--define", action="append", help="NAME=VALUE for both")
    c.add_argument(
        "--click-extra",
        action="append",
        help="a line appended to Click's copy only (e.g. 'Idle -> [1]q;' where Click wants every input connected)",
    )
    c.add_argument(
        "--timing", action="store_true", help="Click replays the trace in real time (FromDump TIMING true)"
    )
    c.add_argument("--show", type=int, default=2, help="differing packets to print")
    c.add_argument("--keep", action="store_true", help="keep the scratch folder")
    r = sub.add_parser(
        "arp-replies",
        help="prepend to a trace the ARP replies of every IPv4 destination in it (within PREFIX), "
        "sent to the router's MAC and IP",
    )
    r.add_argument("trace")
    r.add_argument("out")
    r.add_argument("--to", required=True, help="MAC,IP of the interface the replies are sent to")
    r.add_argument("--net", required=True, help="PREFIX/LEN: destinations that get a reply")
    sub.add_parser("selftest", help="check the comparison itself (no Click needed)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        return selftest(a)
    if a.cmd == "build-click":
        return build_click(a)
    if a.cmd == "arp-replies":
        return arp_replies(a)
    a.fusebox = os.path.abspath(a.fusebox) if os.path.exists(a.fusebox) else a.fusebox
    a.click = os.path.abspath(a.click) if os.path.exists(a.click) else a.click
    if a.timing:
        TIMING[0] = ", TIMING true"
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
