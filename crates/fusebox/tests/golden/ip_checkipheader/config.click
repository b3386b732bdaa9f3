// CheckIPHeader(14): the IP header starts 14 bytes in. Good packets leave on output 0,
// shortened to the IP length (Ethernet padding removed). Output 1 is not connected, so bad
// packets (bad checksum, IP length beyond the packet, version 6, under 20 bytes) are dropped.
FromDump(input.pcap)
  -> CheckIPHeader(14)
  -> ToDump(out0.pcap);
