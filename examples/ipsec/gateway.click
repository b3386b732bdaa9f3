// An IPsec gateway (ESP tunnel mode, AES-GCM): traffic from the LAN (eth0) leaves by the
// WAN (eth1) encrypted to the peer gateway $REMOTE; ESP from $REMOTE arriving on eth1 is
// checked (SPI, addresses, anti-replay window, ICV), decrypted and sent to the LAN.
// The keys below are examples: never reuse them, and never run two encrypting copies of
// one key (the IV is the sequence number).
define($LOCAL 192.0.2.1, $REMOTE 192.0.2.2,
       $SPI_OUT 0x1001, $KEY_OUT 000102030405060708090a0b0c0d0e0fa0a1a2a3,
       $SPI_IN 0x1002, $KEY_IN 101112131415161718191a1b1c1d1e1fb0b1b2b3,
       $MAC0 02:00:00:00:01:10, $PEER0 02:00:00:00:01:0f,
       $MAC1 02:00:00:00:01:11, $PEER1 02:00:00:00:02:11)

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> DecIPTTL
  -> IPsecGCMEncap(SPI $SPI_OUT, KEY $KEY_OUT, SRC $LOCAL, DST $REMOTE)
  -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);

FromDevice(eth1) -> Strip(14) -> CheckIPHeader
  -> IPsecGCMDecap(SPI $SPI_IN, KEY $KEY_IN, SRC $REMOTE, DST $LOCAL, REPLAY 128)
  -> DecIPTTL -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);
