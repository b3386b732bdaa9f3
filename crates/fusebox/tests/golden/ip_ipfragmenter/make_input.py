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


payload = bytes((i * 7) % 251 for i in range(1372))
write([
    # 1400-byte datagram (20 IP + 8 UDP + 1372): three fragments at MTU 576.
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=9999) / Raw(payload),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / UDP(sport=1001, dport=9999) / Raw(payload[:72]),
    # Same size with DF set: cannot be fragmented.
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=3, flags="DF") / UDP(sport=1002, dport=9999) / Raw(payload),
])

