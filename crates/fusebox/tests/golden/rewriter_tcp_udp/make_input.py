#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

IN = "02:00:00:00:00:10"
GW = "02:00:00:00:00:20"
SRV = "93.184.216.34"

pkts = [
    # 1: TCP SYN from the inside (tr input 0, snat): 192.168.0.10:3000 -> pub:3000.
    IP(src="192.168.0.10", dst=SRV, id=1) / TCP(sport=3000, dport=443, flags="S", seq=1000, window=1024),
    # 2: the SYN-ACK reply (tr input 0, reverse mapping) -> back to 192.168.0.10:3000.
    IP(src=SRV, dst="203.0.113.1", id=2) / TCP(sport=443, dport=3000, flags="SA", seq=5000, ack=1001, window=1024),
    # 3: more of flow 1, with data: same mapping.
    IP(src="192.168.0.10", dst=SRV, id=3) / TCP(sport=3000, dport=443, flags="PA", seq=1001, ack=5001, window=1024) / Raw(b"hello"),
    # 4: TCP SYN from outside to pub:80 (tr input 1, toweb): destination -> web:8080.
    IP(src="198.51.100.7", dst="203.0.113.1", id=4) / TCP(sport=40000, dport=80, flags="S", seq=7, window=2048),
    # 5: the web server's SYN-ACK (tr input 0, reverse mapping): source -> pub:80.
    IP(src="10.1.1.2", dst="198.51.100.7", id=5) / TCP(sport=8080, dport=40000, flags="SA", seq=900, ack=8, window=2048),
    # 6: UDP query (ur): 192.168.0.10:5353 -> pub:5353.
    IP(src="192.168.0.10", dst="8.8.8.8", id=6) / UDP(sport=5353, dport=53) / Raw(b"query"),
    # 7: its reply (ur, reverse mapping).
    IP(src="8.8.8.8", dst="203.0.113.1", id=7) / UDP(sport=53, dport=5353) / Raw(b"answer"),
    # 8: UDP without checksum (ur): the checksum stays 0.
    IP(src="192.168.0.11", dst="9.9.9.9", id=8) / UDP(sport=5400, dport=9, chksum=0) / Raw(b"nocsum"),
    # 9: ICMP reaches ur: not TCP/UDP, dropped.
    IP(src="192.168.0.10", dst="8.8.8.8", id=9) / ICMP(type=8, id=1, seq=1),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=IN, dst=GW) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
