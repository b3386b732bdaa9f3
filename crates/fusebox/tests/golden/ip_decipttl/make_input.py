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


write([
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=64, id=1) / UDP(sport=1000, dport=9999) / Raw(b"ttl64"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=2, id=2) / TCP(sport=40000, dport=80, flags="S", seq=7),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=1, id=3) / ICMP(type=8, id=7, seq=1),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=0, id=4) / UDP(sport=1000, dport=9999),
])

