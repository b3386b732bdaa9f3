// A NAPT: traffic from eth0 gets source $EXT and a source port from 1024-65535;
// replies arriving on eth1 are translated back and leave by eth0.
define($EXT 10.0.101.1,
       $MAC0 02:00:00:00:00:10, $PEER0 02:00:00:00:00:0f,
       $MAC1 02:00:00:00:00:11, $PEER1 02:00:00:00:00:12)

rw :: IPRewriter(pattern $EXT 1024-65535 - - 0 1, drop);

FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;
rw[0] -> DecIPTTL -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);
rw[1] -> DecIPTTL -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);
