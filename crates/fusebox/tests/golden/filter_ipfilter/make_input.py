#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, Raw, PcapWriter

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def write(pkts):
    w = PcapWriter("input.pcap", linktype=1, sync=True)
    for i, p in enumerate(pkts):
        p.time = 1700000000 + i
        w.write(p)
    w.close()


ssh = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / TCP(sport=40000, dport=22, flags="S", seq=1)
banned = Ether(src=A, dst=B) / IP(src="10.0.0.66", dst="10.0.0.2", id=2) / TCP(sport=40000, dport=80, flags="S", seq=1)
dns = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=3) / UDP(sport=5000, dport=53) / Raw(b"q")
mdns = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=4) / UDP(sport=5000, dport=5353) / Raw(b"q")
# A later fragment of a TCP datagram: its first 4 payload bytes look like ports 40000 -> 80,
# but port tests only match first fragments, so it falls through to "drop all".
later_fragment = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=5, proto=6, frag=3) / Raw(b"\x9c\x40\x00\x50" + b"x" * 12)
web = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=6) / TCP(sport=40000, dport=80, flags="A", seq=2, ack=1)

write([ssh, banned, dns, mdns, later_fragment, web])
