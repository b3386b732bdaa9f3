// The Click counterpart of monitor.toml: every frame through a Monitor, IPv4 ones with
// their header marked (devices NF_IFACE and the element NF/nf, as the chain names them,
// for `fusebox verify monitor.toml --against`).
c :: Classifier(12/0800, -);
FromDevice(mon_eth0) -> c;
c[0] -> MarkIPHeader(14) -> mon/nf :: Monitor;
c[1] -> mon/nf;
mon/nf -> ToDevice(mon_eth1);
