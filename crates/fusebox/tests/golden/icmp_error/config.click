// ICMPError(SRC, timeexceeded, transit): a new IP/ICMP packet from SRC to the original
// source (TTL 200, ID counting from 1) quoting the original IP packet, cut to 576 bytes in
// all; the original is consumed. No error for ICMP errors, broadcast destinations or
// non-first fragments.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> ICMPError(10.0.0.254, timeexceeded, transit)
  -> EtherEncap(0x0800, 02:00:00:00:00:fe, 02:00:00:00:00:01)
  -> ToDump(out0.pcap);
