#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, PcapWriter

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def write(pkts):
    w = PcapWriter("input.pcap", linktype=1, sync=True)
    for i, p in enumerate(pkts):
        p.time = 1700000000 + i
        w.write(p)
    w.close()


syn80 = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / TCP(sport=40000, dport=80, flags="S", seq=1)
ack80 = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="10.0.0.2", id=2) / TCP(sport=40000, dport=80, flags="A", seq=2, ack=1)
dns = Ether(src=A, dst=B) / IP(src="10.0.0.1", dst="8.8.8.8", id=3) / UDP(sport=5353, dport=53) / Raw(b"q")
echo = Ether(src=B, dst=A) / IP(src="192.168.0.1", dst="10.0.0.1", id=4) / ICMP(type=8, id=7, seq=1)
reply = Ether(src=B, dst=A) / IP(src="192.168.0.1", dst="10.0.0.1", id=5) / ICMP(type=0, id=7, seq=1)
ssh_low_ttl = Ether(src=A, dst=B) / IP(src="10.0.0.3", dst="10.0.0.2", id=6, ttl=5) / TCP(sport=1000, dport=22, flags="S", seq=1)

write([syn80, ack80, dns, echo, reply, ssh_low_ttl])
