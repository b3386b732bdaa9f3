// DecIPTTL decrements the TTL and updates the IP checksum incrementally; packets with
// TTL <= 1 are dropped since output 1 is not connected.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> DecIPTTL
  -> Unstrip(14)
  -> ToDump(out0.pcap);
