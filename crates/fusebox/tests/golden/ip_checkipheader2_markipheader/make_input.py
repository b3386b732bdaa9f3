#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, Padding, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

pkts = [
    # UDP (CheckIPHeader2 + LinearIPLookup)
    # 1: good -> lin[0].
    IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=2000) / Raw(b"good"),
    # 2: bad header checksum: CheckIPHeader2 lets it through -> lin[0], unchanged.
    IP(src="10.0.0.1", dst="10.0.0.3", id=2, chksum=0xbeef) / UDP(sport=1001, dport=2001) / Raw(b"badck"),
    # 3: 172.16/12 via a gateway -> lin[1]; the Ethernet padding is trimmed.
    IP(src="10.0.0.1", dst="172.16.5.5", id=3) / UDP(sport=1002, dport=2002) / Raw(b"p") / Padding(b"\0" * 17),
    # 4: no route in lin (no default): dropped.
    IP(src="10.0.0.1", dst="8.8.8.8", id=4) / UDP(sport=1003, dport=53) / Raw(b"none"),
    # 5: IP length larger than the packet: CheckIPHeader2 still checks lengths: dropped.
    IP(src="10.0.0.1", dst="10.0.0.2", id=5, len=200) / UDP(sport=1004, dport=2004) / Raw(b"long"),
    # Others (MarkIPHeader + GetIPAddress(16) + DirectIPLookup)
    # 6: TCP with a bad header checksum to 10/8 -> dl[0], unchanged (nothing checks it).
    IP(src="10.0.0.1", dst="10.7.7.7", id=6, chksum=0x0bad) / TCP(sport=40000, dport=80, flags="S", seq=9, window=1024),
    # 7: ICMP echo to 8.8.4.4 -> default -> dl[1] -> DecIPTTL (ttl 64 -> 63).
    IP(src="10.0.0.1", dst="8.8.4.4", id=7) / ICMP(type=8, id=3, seq=4) / Raw(b"ping"),
    # 8: TCP with TTL 1 -> dl[1] -> DecIPTTL drops it (output 1 unconnected).
    IP(src="10.0.0.1", dst="9.9.9.9", id=8, ttl=1) / TCP(sport=40001, dport=443, flags="S", seq=1, window=1024),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=A, dst=B) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
