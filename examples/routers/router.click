// An IPv4 router, as in FastClick's and SNF's router benchmarks:
// Strip -> CheckIPHeader -> RadixIPLookup (15 routes) -> DecIPTTL -> EtherEncap.
// eth0 faces 10.0.0.0/16 (the sources), eth1 faces everything else.
define($MAC0 02:00:00:00:00:10, $PEER0 02:00:00:00:00:0f,
       $MAC1 02:00:00:00:00:11, $PEER1 02:00:00:00:00:12)

rt :: RadixIPLookup(
    10.0.0.0/16 0,
    10.1.0.0/16 1,
    10.2.0.0/16 1,
    10.3.0.0/16 1,
    172.16.0.0/12 1,
    192.168.0.0/16 0,
    100.64.0.0/10 1,
    198.18.0.0/15 1,
    203.0.113.0/24 1,
    198.51.100.0/24 1,
    192.0.2.0/24 0,
    10.128.0.0/9 1,
    10.4.0.0/14 1,
    10.1.128.0/17 1,
    0.0.0.0/0 1);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> rt;
rt[0] -> DecIPTTL -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);
rt[1] -> DecIPTTL -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);
