// StaticIPLookup: longest-prefix match on the destination IP annotation, which
// CheckIPHeader sets to the header's destination. A route with a gateway replaces the
// annotation by the gateway; `-` (no gateway) keeps it. The second lookup (nh) therefore
// sees the gateway, not the packet's destination; SetIPAddress overrides the annotation
// before it. The packets themselves are not changed (CheckIPHeader trims Ethernet padding).
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> rt :: StaticIPLookup(10.0.0.0/8 0, 10.1.0.0/16 10.0.0.254 1, 192.168.5.0/24 - 1, 0.0.0.0/0 192.0.2.1 2);
rt[0] -> Unstrip(14) -> ToDump(out0.pcap);
rt[1] -> nh :: StaticIPLookup(10.0.0.254/32 0, 0.0.0.0/0 1);
rt[2] -> SetIPAddress(10.0.0.254) -> nh;
nh[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> o1 :: ToDump(out1.pcap);
nh[1] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fd) -> o1;
