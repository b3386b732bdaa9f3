#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; plain Python).

TCP segments and UDP datagrams cut to 7, 8, 12, 16, 17, 18, 19 and 20 transport bytes (the
IP total length ends there; half the frames carry a zero Ethernet trailer to 60 bytes,
which CheckIPHeader cuts away), each its own flow, to port 80 (IPRewriter) and to port 443
(UDPRewriter); the TCP segments carry FIN|ACK, then a whole segment of the first TCP flow
follows (it takes the mapping the short one made)."""
import struct

A = bytes.fromhex("020000000001")
B = bytes.fromhex("020000000002")


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(proto, sport, dport, n, pad, ident, flags=0x11):
    src, dst = bytes([192, 168, 0, 5]), bytes([8, 8, 8, 8])
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1000, 2000, 0x50, flags, 1024, 0, 0)
        l4 += b"payload!"
        pseudo = src + dst + struct.pack("!BBH", 0, 6, len(l4))
        ck = csum(pseudo + l4)
        l4 = l4[:16] + struct.pack("!H", ck) + l4[18:]
    else:
        body = b"datagram"
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(body), 0) + body
        pseudo = src + dst + struct.pack("!BBH", 0, 17, len(l4))
        ck = csum(pseudo + l4) or 0xFFFF
        l4 = l4[:6] + struct.pack("!H", ck) + l4[8:]
    l4 = l4[:n]
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident, 0, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    f = B + A + b"\x08\x00" + h + l4
    if pad and len(f) < 60:
        f += b"\0" * (60 - len(f))
    return f


frames = []
ident = 1
for proto in (6, 17):
    for dport in (80, 443):
        for i, n in enumerate((7, 8, 12, 16, 17, 18, 19, 20)):
            sport = 40000 + 100 * (proto == 17) + 10 * (dport == 443) + i
            frames.append(frame(proto, sport, dport, n, i % 2 == 1, ident))
            ident += 1
# A whole segment of the 8-byte TCP flow to port 80: the mapping its short segment made.
frames.append(frame(6, 40001, 80, 28, False, ident, flags=0x18))

with open("input.pcap", "wb") as out:
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, f in enumerate(frames):
        out.write(struct.pack("<IIII", 1700000000, i, len(f), len(f)))
        out.write(f)
