// IPsecGCMEncap / IPsecGCMDecap (ESP tunnel mode, AES-GCM-128, RFC 4303/4106).
// Plain IP from the LAN is encrypted with SA 0x1001 (sequence numbers 1, 2, 3; IV = the
// sequence number; IP ID = its low 16 bits; TTL 64; TOS and DF copied) and written to
// out0.pcap. ESP from the peer (SA 0x1002, made by scapy: input 4-12) is checked and
// decrypted to out1.pcap: replays, a bad ICV, another SPI and a cut packet are dropped
// by reason; after 10, the window of 4 refuses 5 (too old) but takes 8 (not seen yet).
FromDump(input.pcap) -> Strip(14) -> CheckIPHeader -> c :: IPClassifier(ip proto 50, -);
c[1] -> IPsecGCMEncap(SPI 0x1001, KEY 000102030405060708090a0b0c0d0e0f, SALT a0a1a2a3,
                      SRC 192.0.2.1, DST 192.0.2.2)
     -> EtherEncap(0x0800, 02:00:00:00:00:21, 02:00:00:00:00:fe) -> ToDump(out0.pcap);
c[0] -> IPsecGCMDecap(SPI 0x1002, KEY 101112131415161718191a1b1c1d1e1fb0b1b2b3,
                      SRC 192.0.2.2, DST 192.0.2.1, REPLAY 4)
     -> EtherEncap(0x0800, 02:00:00:00:00:20, 02:00:00:00:00:10) -> ToDump(out1.pcap);
