// LookupIPRoute's old route syntax `DST MASK GW OUT` (gateway 0.0.0.0 = none), mixed with
// the `ADDR/LEN GW OUT` syntax. The gateway shows as IPEncap's outer destination.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> rt :: LookupIPRoute(10.0.1.0 255.255.255.0 0.0.0.0 0,
                         0.0.0.0 0.0.0.0 10.0.0.254 1,
                         10.0.3.0/24 10.0.3.1 1);
rt[0] -> Unstrip(14) -> ToDump(out0.pcap);
rt[1] -> IPEncap(4, 192.168.100.1, DST_ANNO)
      -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDump(out1.pcap);
