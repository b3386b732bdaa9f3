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


dsts = ["10.0.1.9", "8.8.8.8", "10.0.3.3"]
write([Ether(src=A, dst=B) / IP(src="10.0.0.1", dst=d, id=i + 1) / UDP(sport=1000 + i, dport=9999) / Raw(b"l%d" % i)
       for i, d in enumerate(dsts)])

