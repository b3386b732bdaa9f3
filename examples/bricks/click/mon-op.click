// An operator NF by name inside a Click configuration: MonitorNF between Click elements.
FromDevice(eth0) -> Counter -> MonitorNF(CAPACITY 1000) -> ToDevice(eth1);
