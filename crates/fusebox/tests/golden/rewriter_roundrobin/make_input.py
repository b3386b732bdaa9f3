#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, Raw, PcapWriter

VIP = "1.2.3.4"
pkts = [
    IP(src="192.168.0.1", dst=VIP, id=1) / TCP(sport=1111, dport=80, flags="S", seq=1, window=512),
    IP(src="192.168.0.1", dst=VIP, id=2) / TCP(sport=1111, dport=80, flags="A", seq=2, ack=9, window=512),
    IP(src="192.168.0.2", dst=VIP, id=3) / TCP(sport=2222, dport=80, flags="S", seq=1, window=512),
    IP(src="192.168.0.3", dst=VIP, id=4) / TCP(sport=3333, dport=80, flags="S", seq=1, window=512),
    IP(src="10.0.0.11", dst="192.168.0.2", id=5) / TCP(sport=80, dport=2222, flags="SA", seq=70, ack=2, window=512),
    IP(src="192.168.0.4", dst=VIP, id=6) / UDP(sport=4444, dport=53) / Raw(b"dns?"),
]
w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src="02:00:00:00:00:10", dst="02:00:00:00:00:20") / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
