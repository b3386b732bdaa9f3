// CheckTCPHeader and CheckICMPHeader after CheckIPHeader (which trims Ethernet padding).
// CheckTCPHeader's output 1 is connected: bad packets (wrong checksum, TCP header longer
// than the IP payload, not TCP at all) leave there. CheckICMPHeader's output 1 is not
// connected: bad packets (wrong checksum, under 8 ICMP bytes) are dropped.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> c :: Classifier(9/01, -);
c[0] -> CheckICMPHeader -> Unstrip(14) -> o0 :: ToDump(out0.pcap);
c[1] -> ct :: CheckTCPHeader -> Unstrip(14) -> o0;
ct[1] -> Unstrip(14) -> ToDump(out1.pcap);
