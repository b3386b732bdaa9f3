#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

IN = "02:00:00:00:00:10"
GW = "02:00:00:00:00:20"

pkts = [
    # 1, 2: UDP from the inside; own source ports lie in 1000-9000 and are free: kept.
    IP(src="192.168.0.10", dst="8.8.8.8", id=1) / UDP(sport=5000, dport=53) / Raw(b"q1"),
    IP(src="192.168.0.11", dst="8.8.8.8", id=2) / UDP(sport=6000, dport=53) / Raw(b"q2"),
    # 3: reply to 1 (hits the reverse mapping).
    IP(src="8.8.8.8", dst="10.0.0.1", id=3) / UDP(sport=53, dport=5000) / Raw(b"r1"),
    # 4: TCP SYN to the public address: destination rewritten to 10.1.1.2.
    IP(src="192.168.0.10", dst="10.0.0.1", id=4) / TCP(sport=40000, dport=80, flags="S", seq=100, window=1024),
    # 5: the server's SYN-ACK (reverse mapping: source becomes 10.0.0.1 again).
    IP(src="10.1.1.2", dst="192.168.0.10", id=5) / TCP(sport=80, dport=40000, flags="SA", seq=500, ack=101, window=1024),
    # 6: ICMP on input 0: not TCP/UDP, dropped.
    IP(src="192.168.0.10", dst="8.8.8.8", id=6) / ICMP(type=8, id=1, seq=1),
    # 7: UDP without checksum: the checksum stays 0.
    IP(src="192.168.0.12", dst="9.9.9.9", id=7) / UDP(sport=7000, dport=9, chksum=0) / Raw(b"nocsum"),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=IN, dst=GW) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
