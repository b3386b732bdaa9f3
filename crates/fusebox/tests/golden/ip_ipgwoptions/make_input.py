#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, Padding, PcapWriter

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def write(pkts):
    w = PcapWriter("input.pcap", linktype=1, sync=True)
    for i, p in enumerate(pkts):
        p.time = 1700000000 + i
        w.write(p)
    w.close()


# Record Route with room for two addresses (type 7, length 11, pointer 4) + end-of-list.
rr_empty = b"\x07\x0b\x04" + b"\x00" * 8 + b"\x00"
# A full Record Route (pointer = length + 1): left alone.
rr_full = b"\x07\x07\x08" + bytes([10, 9, 9, 9]) + b"\x00"
# A pointer of 2 is invalid (RR pointers start at 4).
rr_bad = b"\x07\x07\x02" + b"\x00" * 4 + b"\x00"
write([
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1, options=[Raw(rr_empty)]) / UDP(sport=1000, dport=9999) / Raw(b"rr"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / UDP(sport=1000, dport=9999) / Raw(b"plain"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=3, options=[Raw(rr_full)]) / UDP(sport=1000, dport=9999) / Raw(b"full"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=4, options=[Raw(rr_bad)]) / UDP(sport=1000, dport=9999) / Raw(b"bad"),
])

