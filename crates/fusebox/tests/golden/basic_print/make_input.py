#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, ARP, Raw, Padding, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

frames = [
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=2000) / Raw(b"printme"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / TCP(sport=40000, dport=80, flags="S", seq=3, window=99) / Padding(b"\0" * 6),
    Ether(src=A, dst=B) / IP(src="10.0.0.2", dst="10.0.0.1", id=3, ttl=7) / ICMP(type=0, id=4, seq=5) / Raw(b"pong"),
    Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=A, psrc="10.0.0.1", pdst="10.0.0.2"),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, f in enumerate(frames):
    f.time = 1700000000 + i
    w.write(f)
w.close()
