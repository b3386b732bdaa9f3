// Chain 1, NF 4: a header blacklist, scanned rule by rule for every packet.
// Blacklisted packets are dropped (`blacklisted`); replies pass.
FromDevice(eth0) -> CheckIPHeader(14) -> BlacklistFilter(FILE blacklist.rules) -> ToDevice(eth1);
FromDevice(eth1) -> ToDevice(eth0);
