// NF2 of SNF Fig. 5: a layer-4 firewall.
// Allows UDP from 10.0.0.1 to port 1234 (eth0 -> eth1) and its replies (eth1 -> eth0);
// drops the rest.
define($MAC3 02:00:00:00:00:03, $MAC4 02:00:00:00:00:04,
       $MACBACK 02:00:00:00:00:13, $PEERBACK 02:00:00:00:00:02)

FromDevice(eth0) -> Strip(14) -> CheckIPHeader
  -> IPFilter(allow src host 10.0.0.1 && udp && dst port 1234, deny all)
  -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MAC3, $MAC4) -> ToDevice(eth1);

FromDevice(eth1) -> Strip(14) -> CheckIPHeader
  -> IPFilter(allow dst host 10.0.0.1 && udp && src port 1234, deny all)
  -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MACBACK, $PEERBACK) -> ToDevice(eth0);
