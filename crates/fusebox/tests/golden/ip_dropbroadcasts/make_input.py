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


write([
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=9999) / Raw(b"unicast"),
    Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / IP(src="10.0.0.1", dst="10.0.0.255", id=2) / UDP(sport=1000, dport=9999) / Raw(b"bcast"),
    Ether(src=A, dst="01:00:5e:00:00:01") / IP(src="10.0.0.1", dst="224.0.0.1", id=3) / UDP(sport=1000, dport=9999) / Raw(b"mcast"),
])

