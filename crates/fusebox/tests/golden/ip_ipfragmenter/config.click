// IPFragmenter(576): a 1400-byte datagram becomes fragments of 552, 552 and 276 data bytes
// (offsets 0, 69 and 138 in 8-byte units); a small packet passes; a large packet with DF is
// dropped (output 1 unconnected).
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> IPFragmenter(576)
  -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02)
  -> ToDump(out0.pcap);
