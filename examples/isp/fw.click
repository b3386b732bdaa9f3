// ISP firewall (SNF Fig. 9, first NF): an access control list as an IPFilter.
// eth0 faces customers (10.0.0.0/16), eth1 faces the ISP router.
define($MAC0 02:00:00:00:0f:10, $PEER0 02:00:00:00:0f:0f,
       $MAC1 02:00:00:00:0f:11, $PEER1 02:00:00:00:0e:10,
       $RULES acl.rules, $FIRST all, $ALLOW_PERCENT 85, $SEED 1)

// The rules: $RULES (Click IPFilter rules or a ClassBench filter set; relative paths are
// read from this folder), the first $FIRST of a ClassBench set, each ClassBench rule
// allowed by a seeded draw ($ALLOW_PERCENT % allow, seed $SEED).
acl :: IPFilter(FILE $RULES, FIRST $FIRST, ALLOW_PERCENT $ALLOW_PERCENT, SEED $SEED);
back :: IPFilter(
    allow dst net 10.0.0.0/16 && (tcp || udp || icmp),
    deny all);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> acl
  -> DecIPTTL -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> back
  -> DecIPTTL -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);
