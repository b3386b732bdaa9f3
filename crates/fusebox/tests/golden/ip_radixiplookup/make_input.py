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


dsts = ["10.0.1.5", "10.0.2.5", "10.0.2.200", "10.0.7.7", "192.168.3.3", "172.16.0.1"]
write([Ether(src=A, dst=B) / IP(src="10.0.0.1", dst=d, id=i + 1) / UDP(sport=1000 + i, dport=9999) / Raw(b"r%d" % i)
       for i, d in enumerate(dsts)])

