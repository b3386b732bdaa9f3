#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, ARP, IP, UDP, Raw, Padding, PcapWriter

H = "02:00:00:00:00:bb"
BC = "ff:ff:ff:ff:ff:ff"
pkts = [
    # Requests for our addresses (padded to the 60-byte Ethernet minimum).
    Ether(src=H, dst=BC) / ARP(op=1, hwsrc=H, psrc="10.0.0.2", pdst="10.0.0.1") / Padding(b"\0" * 18),
    Ether(src=H, dst=BC) / ARP(op=1, hwsrc=H, psrc="192.168.1.5", pdst="192.168.1.77") / Padding(b"\0" * 18),
    # A request for someone else, a reply, and an IP packet: output 1.
    Ether(src=H, dst=BC) / ARP(op=1, hwsrc=H, psrc="10.0.0.2", pdst="10.0.0.9") / Padding(b"\0" * 18),
    Ether(src=H, dst="00:00:00:00:00:0a") / ARP(op=2, hwsrc=H, psrc="10.0.0.2", hwdst="00:00:00:00:00:0a", pdst="10.0.0.1"),
    Ether(src=H, dst="00:00:00:00:00:0a") / IP(src="10.0.0.2", dst="10.0.0.1", id=9) / UDP(sport=1, dport=2) / Raw(b"x"),
]
w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    p.time = 1700000000 + i
    w.write(p)
w.close()
