// Strip(14) removes the Ethernet header; Unstrip(14) puts the same 14 bytes back
// (Click's push() only moves the data pointer back), so out0 equals the input.
// The other branch shows the stripped packet: re-encapsulated with a new header.
FromDump(input.pcap)
  -> Strip(14)
  -> t :: Tee;
t[0] -> Unstrip(14) -> ToDump(out0.pcap);
t[1] -> EtherEncap(0x0800, 00:00:00:00:0e:01, 00:00:00:00:0e:02) -> ToDump(out1.pcap);
