// Chain 1, NF 3: per-flow packet and byte counters on the way to the backends.
// Replies pass unmonitored.
FromDevice(eth0) -> CheckIPHeader(14) -> Monitor -> ToDevice(eth1);
FromDevice(eth1) -> ToDevice(eth0);
