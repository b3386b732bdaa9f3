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


good = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=9999) / Raw(b"ok")
# Ethernet padding beyond the IP length: CheckIPHeader trims it.
padded = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.3", id=2) / TCP(sport=40000, dport=80, flags="S", seq=1) / Padding(b"\x00" * 6)
bad_cksum = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.4", id=3, chksum=0x1234) / UDP(sport=1000, dport=9999) / Raw(b"bad")
# IP total length 200, but only 31 IP bytes present.
truncated = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.5", id=4, len=200) / UDP(sport=1000, dport=9999, len=11) / Raw(b"cut")
bad_version = Ether(src=A, dst=B) / IP(version=6, src="10.0.0.1", dst="10.0.0.6", id=5) / UDP(sport=1000, dport=9999)
tiny = Ether(src=A, dst=B, type=0x0800) / Raw(b"\x45\x00\x00\x14\x00\x06\x00\x00\x40\x11")

write([good, padded, bad_cksum, truncated, bad_version, tiny])

