#!/usr/bin/python3
"""Writes input.pcap for this golden case (run from the case directory with Debian's
python3 and python3-scapy). The ESP packets are scapy's (an outside implementation of
RFC 4303/4106), for the SA 0x1002 that config.click's IPsecGCMDecap holds."""
from scapy.all import Ether, IP, UDP, TCP, Raw, PcapWriter
from scapy.layers.ipsec import ESP, SecurityAssociation

LAN = "02:00:00:00:00:10"
GW = "02:00:00:00:00:20"
KEY2 = bytes.fromhex("101112131415161718191a1b1c1d1e1fb0b1b2b3")

sa = SecurityAssociation(
    ESP, spi=0x1002, crypt_algo="AES-GCM", crypt_key=KEY2,
    tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1", id=0x77, ttl=50),
)
other = SecurityAssociation(
    ESP, spi=0x9999, crypt_algo="AES-GCM", crypt_key=KEY2,
    tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1", id=0x78),
)


def esp(seq, inner, s=sa):
    return s.encrypt(inner, seq_num=seq, iv=seq.to_bytes(8, "big"))


def back(i, n):
    return IP(src="10.2.0.7", dst="10.1.0.5", id=100 + i, ttl=63) / UDP(sport=5000, dport=4000) / Raw(b"r" * n)


tampered = bytearray(bytes(esp(3, back(3, 9))))
tampered[-5] ^= 0x01
truncated = bytes(esp(4, back(4, 9)))[:20 + 8 + 8 + 10]

pkts = [
    # 1-3: LAN traffic to encrypt (SA 0x1001): UDP of 0 and 5 bytes, a TCP SYN with DF.
    IP(src="10.1.0.5", dst="10.2.0.7", id=1, ttl=64) / UDP(sport=4000, dport=5000),
    IP(src="10.1.0.5", dst="10.2.0.7", id=2, ttl=64, tos=0x10) / UDP(sport=4000, dport=5000) / Raw(b"hello"),
    IP(src="10.1.0.6", dst="10.2.0.8", id=3, ttl=64, flags="DF") / TCP(sport=40000, dport=80, flags="S", seq=1, window=1024),
    # 4-5: ESP from the peer, sequence numbers 1 and 2: decrypted.
    esp(1, back(1, 3)),
    esp(2, back(2, 40)),
    # 6: 2 again: a replay.
    esp(2, back(2, 40)),
    # 7: 3 with a flipped ciphertext byte: bad ICV.
    IP(bytes(tampered)),
    # 8: 10: decrypted (the window moves to 10).
    esp(10, back(10, 1)),
    # 9: 5: older than the window of 4 below 10: replay.
    esp(5, back(5, 2)),
    # 10: another SPI.
    esp(6, back(6, 2), s=other),
    # 11: cut short (the IP length says so too): malformed.
    IP(truncated[:2] + len(truncated).to_bytes(2, "big") + truncated[4:10] + b"\0\0" + truncated[12:]),
    # 12: 8: within the window of 4 below 10 and not seen yet: decrypted.
    esp(8, back(8, 9)),
]

w = PcapWriter("input.pcap", linktype=1, sync=True)
for i, p in enumerate(pkts):
    if IP in p and p[IP].proto == 50 and i == 10:
        p[IP].chksum = None
    f = Ether(src=LAN if i < 3 else GW, dst=GW if i < 3 else LAN) / p
    f.time = 1700000000 + i
    w.write(f)
w.close()
