#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, Padding, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

pkts = [
    # 1: 10/8, no gateway -> rt[0].
    IP(src="10.0.0.1", dst="10.2.0.1", id=1) / UDP(sport=1000, dport=2000) / Raw(b"net10"),
    # 2: 10.1/16 (longer than 10/8) via 10.0.0.254 -> rt[1]; nh sees 10.0.0.254 -> nh[0].
    IP(src="10.0.0.1", dst="10.1.2.3", id=2) / TCP(sport=40000, dport=80, flags="S", seq=1, window=512),
    # 3: 192.168.5/24 with `-` gateway -> rt[1]; nh sees 192.168.5.7 -> nh[1]. Padded frame.
    IP(src="10.0.0.1", dst="192.168.5.7", id=3) / UDP(sport=1001, dport=2001) / Raw(b"x") / Padding(b"\0" * 17),
    # 4: default via 192.0.2.1 -> rt[2]; SetIPAddress makes it 10.0.0.254 -> nh[0].
    IP(src="10.0.0.1", dst="8.8.8.8", id=4) / ICMP(type=8, id=5, seq=1),
    # 5: bad header checksum: CheckIPHeader drops it.
    IP(src="10.0.0.1", dst="10.2.0.2", id=5, chksum=0x1234) / UDP(sport=1002, dport=2002),
    # 6: 10.1.0.0/16 edge: 10.1.255.255 -> rt[1] via gateway -> nh[0].
    IP(src="10.0.0.1", dst="10.1.255.255", id=6) / UDP(sport=1003, dport=2003) / Raw(b"edge"),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=A, dst=B) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
