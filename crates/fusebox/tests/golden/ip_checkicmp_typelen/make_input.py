#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, ICMP, Raw, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"
Q = IP(src="10.0.0.2", dst="10.0.0.9", id=77) / UDP(sport=5000, dport=6000)

pkts = [
    # 1: port unreachable quoting the IP header and 8 bytes (36 ICMP bytes): good.
    IP(src="10.0.0.1", dst="10.0.0.2", id=1) / ICMP(type=3, code=3) / Raw(bytes(Q)[:28]),
    # 2: port unreachable quoting only the 20-byte IP header (28 ICMP bytes): bad length.
    IP(src="10.0.0.1", dst="10.0.0.2", id=2) / ICMP(type=3, code=3) / Raw(bytes(Q)[:20]),
    # 3: timestamp request, 20 bytes: good.
    IP(src="10.0.0.1", dst="10.0.0.2", id=3) / ICMP(type=13, id=1, seq=1, ts_ori=1, ts_rx=0, ts_tx=0),
    # 4: timestamp request with 4 extra bytes (24): bad length.
    IP(src="10.0.0.1", dst="10.0.0.2", id=4) / ICMP(type=13, id=1, seq=2, ts_ori=1, ts_rx=0, ts_tx=0) / Raw(b"xtra"),
    # 5: information request, 8 bytes: good.
    IP(src="10.0.0.1", dst="10.0.0.2", id=5) / ICMP(type=15, id=1, seq=3),
    # 6: information request with 4 extra bytes (12): bad length.
    IP(src="10.0.0.1", dst="10.0.0.2", id=6) / ICMP(type=15, id=1, seq=4) / Raw(b"xtra"),
    # 7: echo request with 8 bytes only: good (no extra rule for echo).
    IP(src="10.0.0.1", dst="10.0.0.2", id=7) / ICMP(type=8, id=1, seq=5),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=A, dst=B) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
