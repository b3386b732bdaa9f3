// NF3 of SNF Fig. 5: a layer-3 load balancer.
// New flows go round robin to 10.0.1.1 and 10.0.1.2 (per flow, not per packet);
// replies come back through the same mapping.
define($MAC5 02:00:00:00:00:05, $MAC6 02:00:00:00:00:06,
       $MACBACK 02:00:00:00:00:15, $PEERBACK 02:00:00:00:00:03)

rr :: RoundRobinIPMapper(- - 10.0.1.1 - 0 1, - - 10.0.1.2 - 0 1);
rw :: IPRewriter(rr, drop);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;
rw[0] -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MAC5, $MAC6) -> ToDevice(eth1);
rw[1] -> DecIPTTL -> IPFragmenter(1500) -> EtherEncap(0x0800, $MACBACK, $PEERBACK) -> ToDevice(eth0);
