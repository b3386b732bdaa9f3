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


# IP and TCP checksums zeroed.
write([
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1, chksum=0) / TCP(sport=40000, dport=80, flags="S", seq=1000, window=1024, chksum=0),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2, chksum=0) / TCP(sport=40000, dport=5001, flags="PA", seq=1001, ack=5, window=1024, chksum=0) / Raw(b"hello, world"),
])

