#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, Raw, PcapWriter

def udp(dst, i):
    return Ether(src="02:00:00:00:00:10", dst="02:00:00:00:00:20") / IP(src="10.0.0.1", dst=dst, id=i) / UDP(sport=1000 + i, dport=9) / Raw(b"p%d" % i)

# (packet, seconds after the start)
pkts = [
    (udp("10.0.0.2", 1), 0.0),    # static entry
    (udp("10.0.0.7", 2), 1.0),    # unknown: held, query
    (udp("10.0.0.7", 3), 1.05),   # held, no query (< 100 ms since the last)
    (udp("10.0.0.255", 4), 2.0),  # subnet broadcast: ff:ff:ff:ff:ff:ff
    (udp("10.0.0.7", 5), 3.0),    # held, query again
]
w = PcapWriter("input.pcap", linktype=1, sync=True)
for p, t in pkts:
    p.time = 1700000000 + t
    w.write(p)
w.close()
