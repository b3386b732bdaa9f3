// NF1 of SNF Fig. 5: a NAPT.
//   eth0 faces the inside network 192.168.0.0/24 (address 192.168.0.1)
//   eth1 faces the firewall (traffic to 10.0/16)
//   eth2 faces the 10.1/16 domain
// UDP from the inside gets source 10.0.0.1 and a source port in 1000-9000;
// TCP gets destination 10.1.1.2; everything else is dropped.
// Replies (from eth1/eth2) are translated back by the rewriter's mappings.
define($MAC1 02:00:00:00:00:01, $MAC2 02:00:00:00:00:02,
       $MACIN 02:00:00:00:00:a1, $HOSTIN 02:00:00:00:00:a2,
       $MAC10 02:00:00:00:01:01, $GW10 02:00:00:00:01:02)

cl :: IPClassifier(udp, tcp, -);
rw :: IPRewriter(pattern 10.0.0.1 1000-9000 - - 0 1,
                 pattern - - 10.1.1.2 - 0 1,
                 drop);
rt :: RadixIPLookup(192.168.0.0/24 0, 10.1.0.0/16 1, 0.0.0.0/0 2);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> cl;
cl[0] -> [0]rw;
cl[1] -> [1]rw;
cl[2] -> Discard;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [2]rw;
FromDevice(eth2) -> Strip(14) -> CheckIPHeader -> [2]rw;

rw[0] -> GetIPAddress(16) -> rt;
rw[1] -> GetIPAddress(16) -> rt;

rt[0] -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MACIN, $HOSTIN) -> ToDevice(eth0);
rt[1] -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MAC10, $GW10) -> ToDevice(eth2);
rt[2] -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MAC1, $MAC2) -> ToDevice(eth1);
