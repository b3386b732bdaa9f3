// With output 1 connected, CheckIPHeader sends bad packets there unchanged instead of
// dropping them.
FromDump(input.pcap)
  -> Strip(14)
  -> c :: CheckIPHeader;
c[0] -> Unstrip(14) -> ToDump(out0.pcap);
c[1] -> Unstrip(14) -> ToDump(out1.pcap);
