// The next hop's MAC addresses.
FromDevice(eth0) -> EtherRewrite(02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDevice(eth1);
