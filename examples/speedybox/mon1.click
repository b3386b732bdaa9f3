// Chain 2, NF 3: per-flow counters, one way (the IDS NF has no reply path).
FromDevice(eth0) -> CheckIPHeader(14) -> Monitor -> ToDevice(eth1);
