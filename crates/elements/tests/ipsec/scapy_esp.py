#!/usr/bin/python3
"""An outside ESP implementation for tests/ipsec_interop.rs: scapy's IPsec layer
(SecurityAssociation, AES-GCM as RFC 4106, tunnel mode).

  scapy_esp.py encrypt KEYSALT SPI SRC DST ESN SEQ IN OUT
      IN: one inner IPv4 datagram in hex per line; OUT: the ESP packets (outer IPv4 header
      onward) in hex, sequence numbers SEQ, SEQ+1, ..., the IV of each its 64-bit sequence
      number (as FuseBox writes it); ESN is 0 or 1.
  scapy_esp.py decrypt KEYSALT SPI ESN IN OUT
      IN: ESP packets (outer IPv4 header onward) in hex, one per line; OUT: the inner
      datagrams in hex, or `bad` for a packet that does not verify.
"""
import sys

from scapy.layers.inet import IP
from scapy.layers.ipsec import ESP, SecurityAssociation


def sa(keysalt, spi, esn, src="0.0.0.0", dst="0.0.0.0", high=0, seq=1):
    return SecurityAssociation(
        ESP,
        spi=spi,
        seq_num=seq,
        crypt_algo="AES-GCM",
        crypt_key=bytes.fromhex(keysalt),
        tunnel_header=IP(src=src, dst=dst),
        esn_en=esn,
        esn=high,
    )


def main(argv):
    cmd = argv[1]
    if cmd == "encrypt":
        keysalt, spi, src, dst, esn, seq, inp, out = argv[2:10]
        spi, esn, seq = int(spi, 0), argv[6] == "1", int(seq)
        lines = [l.strip() for l in open(inp) if l.strip()]
        with open(out, "w") as f:
            for i, h in enumerate(lines):
                n = seq + i
                # The SA's own counter carries the low half: scapy's `seq_num=0` argument
                # would fall back to it (`seq_num or self.seq_num`).
                s = sa(keysalt, spi, esn, src, dst, n >> 32, n & 0xFFFFFFFF)
                inner = IP(bytes.fromhex(h))
                e = s.encrypt(inner, seq_num=n & 0xFFFFFFFF, iv=n.to_bytes(8, "big"))
                f.write(bytes(e).hex() + "\n")
    elif cmd == "decrypt":
        keysalt, spi, esn, inp, out = argv[2:7]
        spi, esn = int(spi, 0), esn == "1"
        lines = [l.strip() for l in open(inp) if l.strip()]
        with open(out, "w") as f:
            for h in lines:
                p = IP(bytes.fromhex(h))
                iv = bytes(p[ESP])[8:16]
                high = int.from_bytes(iv, "big") >> 32
                try:
                    inner = sa(keysalt, spi, esn, high=high).decrypt(p)
                    f.write(bytes(inner).hex() + "\n")
                except Exception:  # an ICV that does not verify
                    f.write("bad\n")
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
