#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; plain Python).

Transport checksums as Click's SetUDPChecksum and SetTCPChecksum compute them, on packets
where Click's rules show: the UDP length field (not the IP length) measures the datagram,
fragments and short datagrams take output 1, the protocol is not checked, and a source
route's final destination goes into the pseudo header."""
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


def ip(proto, payload, opts=b"", total=None, flags_frag=0, ident=1,
       src="10.0.0.1", dst="10.0.0.2"):
    hl = 20 + len(opts)
    total = hl + len(payload) if total is None else total
    a = bytes(int(x) for x in src.split("."))
    d = bytes(int(x) for x in dst.split("."))
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | hl // 4, 0, total, ident, flags_frag, 64,
                    proto, 0, a, d) + opts
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def udp(sport, dport, data, length=None):
    length = 8 + len(data) if length is None else length
    return struct.pack("!HHHH", sport, dport, length, 0) + data


def tcp(sport, dport, seq, data=b"", off=5, opts=b""):
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, off << 4, 0x10, 8192, 0,
                       0) + opts + data


def eth(p):
    return B + A + b"\x08\x00" + p


# NOP, then LSRR with two addresses: 10.9.9.9 is the final destination. NOP pads to 12.
LSRR = bytes([1, 131, 11, 4, 10, 7, 7, 7, 10, 9, 9, 9])

frames = [
    # 1. A plain UDP datagram with a zero checksum.
    eth(ip(17, udp(1000, 9999, b"12345678"), ident=1)),
    # 2. UDP length 12 inside a 16-byte IP payload: 12 bytes are summed.
    eth(ip(17, udp(1000, 9999, b"12345678", length=12), ident=2)),
    # 3. IP length 32 (4 payload bytes beyond the header's reach are frame bytes): UDP
    #    length 16 reaches the frame's end, and those bytes are summed.
    eth(ip(17, udp(1000, 9999, b"abcdefgh"), total=32, ident=3)),
    # 4. A first fragment (MF): output 1 of SetUDPChecksum.
    eth(ip(17, udp(1000, 9999, b"frag0001"), flags_frag=0x2000, ident=4)),
    # 5. A UDP length (200) beyond the bytes there: output 1.
    eth(ip(17, udp(1000, 9999, b"long0001", length=200), ident=5)),
    # 6. An ICMP echo request with 24 data bytes: identifier 0x0010 reads as a UDP length
    #    of 16; both elements write into it, with protocol 1 in the pseudo header.
    eth(ip(1, struct.pack("!BBHHH", 8, 0, 0, 0x10, 1) + bytes(range(24)), ident=6)),
    # 7. TCP with data offset 2 (no FIXOFF: not read); sequence 0x00140000 reads as UDP
    #    length 20.
    eth(ip(6, tcp(4000, 80, 0x00140000, b"hello", off=2), ident=7)),
    # 8. TCP with an LSRR option: the pseudo header's destination is 10.9.9.9.
    eth(ip(6, tcp(4001, 80, 1, b"route"), opts=LSRR, ident=8)),
    # 9. Four transport bytes: SetUDPChecksum's output 1, SetTCPChecksum drops it.
    eth(ip(17, b"\x03\xe8\x27\x0f", ident=9)),
]

with open("input.pcap", "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, fr in enumerate(frames):
        f.write(struct.pack("<IIII", 1700000000 + i, 0, len(fr), len(fr)))
        f.write(fr)
