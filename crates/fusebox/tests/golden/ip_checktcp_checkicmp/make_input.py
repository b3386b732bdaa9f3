#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory; needs scapy)."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, Raw, Padding, PcapWriter

A = "02:00:00:00:00:10"
B = "02:00:00:00:00:20"

pkts = [
    # 1: good TCP SYN in a padded 60-byte frame (the padding is not part of the checksum).
    IP(src="10.0.0.1", dst="10.0.0.2", id=1) / TCP(sport=40000, dport=80, flags="S", seq=100, window=512) / Padding(b"\0" * 6),
    # 2: good TCP segment with data.
    IP(src="10.0.0.1", dst="10.0.0.2", id=2) / TCP(sport=40000, dport=80, flags="PA", seq=101, ack=7, window=512) / Raw(b"GET /"),
    # 3: TCP with a wrong checksum -> CheckTCPHeader output 1.
    IP(src="10.0.0.1", dst="10.0.0.2", id=3) / TCP(sport=40000, dport=80, flags="PA", seq=106, ack=7, window=512, chksum=0x1234) / Raw(b"bad"),
    # 4: TCP data offset 15 (60 bytes) but only 20 TCP bytes in the IP payload -> output 1.
    IP(src="10.0.0.1", dst="10.0.0.2", id=4) / TCP(sport=40001, dport=80, flags="S", seq=5, window=512, dataofs=15),
    # 5: UDP is not TCP -> output 1.
    IP(src="10.0.0.1", dst="10.0.0.2", id=5) / UDP(sport=53, dport=53) / Raw(b"udp"),
    # 6: good ICMP echo request.
    IP(src="10.0.0.1", dst="10.0.0.2", id=6) / ICMP(type=8, id=1, seq=1) / Raw(b"ping"),
    # 7: ICMP echo with a wrong checksum: dropped.
    IP(src="10.0.0.1", dst="10.0.0.2", id=7) / ICMP(type=8, id=1, seq=2, chksum=0x4321) / Raw(b"ping"),
    # 8: ICMP with 4 bytes after the IP header (under 8): dropped.
    IP(src="10.0.0.1", dst="10.0.0.2", id=8, proto=1) / Raw(b"\x08\x00\xf7\xff"),
    # 9: good ICMP echo reply in a padded frame.
    IP(src="10.0.0.2", dst="10.0.0.1", id=9) / ICMP(type=0, id=1, seq=1) / Padding(b"\0" * 18),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    f = Ether(src=A, dst=B) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
