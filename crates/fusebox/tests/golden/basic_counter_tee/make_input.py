#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def frame(dst_ip, i, src_mac=A, dst_mac=B):
    ip = IP(src="10.0.0.1", dst=dst_ip, ttl=64, id=i)
    kind = i % 3
    if kind == 1:
        l4 = UDP(sport=1000 + i, dport=9999) / Raw(b"udp-%d" % i)
    elif kind == 2:
        l4 = TCP(sport=40000 + i, dport=80, flags="S", seq=1000 * i, window=1024)
    else:
        l4 = ICMP(type=8, id=7, seq=i)
    return Ether(src=src_mac, dst=dst_mac) / ip / l4

pkts = [frame('10.0.1.%d' % i, i) for i in range(1, 5)]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    p.time = 1700000000 + i
    w.write(p)
w.close()
