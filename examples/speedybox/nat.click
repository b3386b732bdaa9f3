// Chain 1, NF 1: the NAT of Click's mazu-nat.click (TCP/UDP part).
//   eth0: the internal network; eth1: the outside (towards the load balancer).
// New TCP/UDP flows from inside get source 203.0.113.1 and a port from 50000-65535;
// replies coming back on eth1 are translated back; anything else is dropped.
nat :: MazuNAT(EXTERNAL 203.0.113.1);

FromDevice(eth0) -> CheckIPHeader(14) -> [0]nat;
FromDevice(eth1) -> CheckIPHeader(14) -> [1]nat;
nat[0] -> ToDevice(eth1);
nat[1] -> ToDevice(eth0);
