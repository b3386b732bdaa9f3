// RoundRobinIPMapper: each NEW flow takes the mapper's next pattern (here two back-end
// servers); later packets of a flow follow its mapping, replies are mapped back (output 1).
rr :: RoundRobinIPMapper(- - 10.0.0.10 - 0 1, - - 10.0.0.11 - 0 1);
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> rw :: IPRewriter(rr);
rw[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> ToDump(out0.pcap);
rw[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:fd) -> ToDump(out1.pcap);
