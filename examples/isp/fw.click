// ISP firewall (SNF Fig. 9, first NF): an access control list as an IPFilter.
// eth0 faces customers (10.0.0.0/16), eth1 faces the ISP router.
define($MAC0 02:00:00:00:0f:10, $PEER0 02:00:00:00:0f:0f,
       $MAC1 02:00:00:00:0f:11, $PEER1 02:00:00:00:0e:10)

acl :: IPFilter(
    deny src net 10.0.66.0/24,
    deny dst net 192.168.0.0/16,
    deny dst net 172.16.0.0/12,
    allow tcp && dst port 80,
    allow tcp && dst port 443,
    allow tcp && dst port 22 && src net 10.0.1.0/24,
    deny tcp && dst port 23,
    allow udp && dst port 53,
    allow udp && dst port 123,
    allow udp && dst port 1234,
    allow udp && dst port >= 5000 && dst port <= 5100,
    allow icmp && icmp type echo,
    allow tcp && tcp opt ack && src port 80,
    allow tcp && tcp opt ack && src port 443,
    allow udp && src port 53,
    deny all);
back :: IPFilter(
    allow dst net 10.0.0.0/16 && (tcp || udp || icmp),
    deny all);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> acl
  -> DecIPTTL -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> back
  -> DecIPTTL -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);
