#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, ARP, IP, IPv6, UDP, TCP, Raw, PcapWriter

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def write(pkts):
    w = PcapWriter("input.pcap", linktype=1, sync=True)
    for i, p in enumerate(pkts):
        p.time = 1700000000 + i
        w.write(p)
    w.close()


arp_request = Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=A, psrc="10.0.0.1", pdst="10.0.0.2")
arp_reply = Ether(src=B, dst=A) / ARP(op=2, hwsrc=B, psrc="10.0.0.2", hwdst=A, pdst="10.0.0.1")
udp = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / UDP(sport=1000, dport=53) / Raw(b"q")
tcp = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / TCP(sport=40000, dport=80, flags="S", seq=1)
v6 = Ether(src=A, dst=B) / IPv6(src="fe80::1", dst="fe80::2") / UDP(sport=1000, dport=53)

write([arp_request, arp_reply, udp, tcp, v6])
