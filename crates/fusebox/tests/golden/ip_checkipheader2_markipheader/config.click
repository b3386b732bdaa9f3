// UDP: CheckIPHeader2 checks the header like CheckIPHeader but not its checksum (a bad
// checksum passes), sets the destination IP annotation and trims Ethernet padding; then
// LinearIPLookup, which has no default route (no match: dropped).
// Other packets: MarkIPHeader only marks the IP header (no check at all), GetIPAddress(16)
// copies the IP destination into the annotation, DirectIPLookup routes on it; DecIPTTL on
// dl[1] works because MarkIPHeader set the network header.
FromDump(input.pcap)
  -> Strip(14)
  -> c :: Classifier(9/11, -);
c[0] -> CheckIPHeader2
  -> lin :: LinearIPLookup(10.0.0.0/8 0, 172.16.0.0/12 10.0.0.254 1);
lin[0] -> Unstrip(14) -> o0 :: ToDump(out0.pcap);
lin[1] -> Unstrip(14) -> o1 :: ToDump(out1.pcap);
c[1] -> MarkIPHeader
  -> GetIPAddress(16)
  -> dl :: DirectIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1);
dl[0] -> Unstrip(14) -> o0;
dl[1] -> DecIPTTL -> Unstrip(14) -> o1;
