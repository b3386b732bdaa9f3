// GetIPAddress(16) copies the IP destination into the destination IP annotation;
// RadixIPLookup picks the longest matching prefix, replaces the annotation by the route's
// gateway if it has one, and sends the packet to the route's output. No route: dropped.
// IPEncap(..., DST_ANNO) makes the annotation visible as the outer destination.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> GetIPAddress(16)
  -> rt :: RadixIPLookup(10.0.1.0/24 0,
                         10.0.2.0/24 10.0.2.254 1,
                         10.0.0.0/16 10.0.0.254 1,
                         10.0.2.128/25 2,
                         192.168.0.0/16 - 2);
rt[0] -> Unstrip(14) -> ToDump(out0.pcap);
rt[1] -> IPEncap(4, 192.168.100.1, DST_ANNO)
      -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDump(out1.pcap);
rt[2] -> IPEncap(4, 192.168.100.1, DST_ANNO)
      -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDump(out2.pcap);
