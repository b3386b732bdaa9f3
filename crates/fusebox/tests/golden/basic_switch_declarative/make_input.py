#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ARP, Raw, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

frames = [
    Ether(src=A, dst=B) / IP(src="10.0.0.5", dst="10.0.0.9", id=1) / UDP(sport=1111, dport=2222) / Raw(b"one"),
    # ARP: not IPv4, StaticSwitch(-1) drops it.
    Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=A, psrc="10.0.0.5", pdst="10.0.0.1"),
    Ether(src=A, dst=B) / IP(src="10.0.0.5", dst="10.0.0.9", id=2) / TCP(sport=3333, dport=80, flags="S", seq=1, window=64),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, f in enumerate(frames):
    f.time = 1700000000 + i
    w.write(f)
w.close()
