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


# IP and UDP checksums zeroed.
write([
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1, chksum=0) / UDP(sport=1000, dport=9999, chksum=0) / Raw(b"query"),
    Ether(src=A, dst=B) / IP(src="192.168.1.10", dst="192.168.1.1", id=2, chksum=0) / UDP(sport=5000, dport=9999, chksum=0) / Raw(b"\x00" * 11),
])

