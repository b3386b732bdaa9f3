#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

pkts = [
    # 1: forwarded (TTL 64 -> 63), source untouched by FixIPSrc.
    IP(src="192.168.0.5", dst="8.8.8.8", id=11, ttl=64) / UDP(sport=1234, dport=53) / Raw(b"fwd"),
    # 2: TTL 1: time exceeded from 10.0.0.1, source fixed to 192.0.2.1.
    IP(src="192.168.0.5", dst="8.8.8.8", id=12, ttl=1) / UDP(sport=1234, dport=53) / Raw(b"expired"),
    # 3: TTL 0 TCP: a second error (IP ID 2).
    IP(src="192.168.0.6", dst="1.1.1.1", id=13, ttl=0) / TCP(sport=5555, dport=80, flags="S", seq=1, window=100),
    # 4: an expired ICMP error message: ICMPError never answers it.
    IP(src="192.168.0.7", dst="8.8.8.8", id=14, ttl=1) / ICMP(type=3, code=3) / IP(src="8.8.8.8", dst="192.168.0.7") / UDP(sport=1, dport=2),
    # 5: TTL 2 TCP: forwarded with TTL 1.
    IP(src="192.168.0.6", dst="1.1.1.1", id=15, ttl=2) / TCP(sport=5556, dport=80, flags="S", seq=2, window=100),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=A, dst=B) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
