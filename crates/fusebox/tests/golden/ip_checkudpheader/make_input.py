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
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=9999) / Raw(b"good"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / UDP(sport=1000, dport=9999, chksum=0x1234) / Raw(b"bad sum"),
    # Checksum 0 means "no checksum": accepted.
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=3) / UDP(sport=1000, dport=9999, chksum=0) / Raw(b"no sum"),
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=4) / TCP(sport=40000, dport=80, flags="S", seq=1),
    # UDP length 40, but only 12 UDP bytes present.
    Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=5) / UDP(sport=1000, dport=9999, len=40) / Raw(b"shrt"),
])
