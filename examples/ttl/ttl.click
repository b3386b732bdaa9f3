// NetBricks' TTL NF: parse Ethernet and IPv4, decrement the TTL, drop at 0.
// Frames that are not IPv4 are dropped; the IPv4 header is marked, not checked (NetBricks
// parses it without verifying the checksum). Expired packets are dropped by DecIPTTL.
c :: Classifier(12/0800, -);
FromDevice(eth0) -> c;
c[0] -> MarkIPHeader(14) -> DecIPTTL -> ToDevice(eth1);
c[1] -> Discard;
