// EtherEncap(ETHERTYPE, SRC, DST) prepends a 14-byte Ethernet header: DST, SRC, ETHERTYPE.
FromDump(input.pcap)
  -> Strip(14)
  -> t :: Tee(2);
t[0] -> EtherEncap(0x0800, 00:00:00:00:0e:01, 00:00:00:00:0e:02) -> ToDump(out0.pcap);
t[1] -> EtherEncap(ETHERTYPE 2048, SRC 02:00:00:00:00:aa, DST ff:ff:ff:ff:ff:ff) -> ToDump(out1.pcap);
