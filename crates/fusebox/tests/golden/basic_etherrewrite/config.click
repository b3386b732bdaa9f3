// EtherRewrite(SRC, DST) overwrites the addresses of the existing Ethernet header and
// leaves the EtherType alone; a frame too short for an Ethernet header is dropped.
FromDump(input.pcap)
  -> EtherRewrite(00:00:00:00:aa:01, 00:00:00:00:bb:02)
  -> ToDump(out0.pcap);
