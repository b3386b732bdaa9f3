// One IPsec NF for chains of identical NFs (NFCompass' IPsec benchmark): every packet from
// eth0 is encrypted into ESP tunnel mode (AES-GCM-128) and decrypted again by the peer's
// side, so it leaves eth1 as it came, at the cost of both gateways. eth1 -> eth0 the same
// with the other direction's SA. $SPI and $KEY differ per NF in a chain.
define($SPI 0x2001, $KEY 202122232425262728292a2b2c2d2e2fc0c1c2c3,
       $RSPI 0x3001, $RKEY 303132333435363738393a3b3c3d3e3fd0d1d2d3)

FromDevice(eth0) -> CheckIPHeader(14)
  -> IPsecGCMEncap(SPI $SPI, KEY $KEY, SRC 198.51.100.1, DST 198.51.100.2)
  -> IPsecGCMDecap(SPI $SPI, KEY $KEY, SRC 198.51.100.1, DST 198.51.100.2)
  -> ToDevice(eth1);
FromDevice(eth1) -> CheckIPHeader(14)
  -> IPsecGCMEncap(SPI $RSPI, KEY $RKEY, SRC 198.51.100.2, DST 198.51.100.1)
  -> IPsecGCMDecap(SPI $RSPI, KEY $RKEY, SRC 198.51.100.2, DST 198.51.100.1)
  -> ToDevice(eth0);
