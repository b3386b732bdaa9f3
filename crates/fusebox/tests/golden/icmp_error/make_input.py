#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

pkts = [
    IP(src="192.168.0.5", dst="8.8.8.8", id=11, ttl=1) / UDP(sport=1234, dport=53) / Raw(b"0123456789abcdefghij"),
    # An ICMP error (port unreachable quoting a datagram): never answered.
    IP(src="192.168.0.5", dst="8.8.8.8", id=12) / ICMP(type=3, code=3) / IP(src="8.8.8.8", dst="192.168.0.5") / UDP(sport=1, dport=2),
    IP(src="192.168.0.5", dst="255.255.255.255", id=13) / UDP(sport=68, dport=67) / Raw(b"bcast"),
    IP(src="192.168.0.5", dst="8.8.8.8", id=14, frag=10) / Raw(b"later fragment"),
    # A long TCP segment: the quote is cut so the error is 576 bytes.
    IP(src="192.168.0.6", dst="1.1.1.1", id=15, ttl=1) / TCP(sport=5555, dport=80, flags="PA", seq=1, ack=1, window=100) / Raw(bytes(range(256)) * 3),
]
w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src="02:00:00:00:00:10", dst="02:00:00:00:00:20") / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
