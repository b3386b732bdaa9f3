// A router's TTL decrement (expired packets dropped and counted).
FromDevice(eth0) -> MarkIPHeader(14) -> DecIPTTL -> ToDevice(eth1);
