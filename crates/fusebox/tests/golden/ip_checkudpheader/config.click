// CheckUDPHeader: packets that are not UDP, whose UDP length exceeds the packet, or whose
// nonzero checksum is wrong leave on output 1 (connected) unchanged; a zero checksum means
// "no checksum". IPPrint passes packets through (printing only with FUSEBOX_PRINT=1).
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> IPPrint(udp)
  -> u :: CheckUDPHeader;
u[0] -> Unstrip(14) -> ToDump(out0.pcap);
u[1] -> Unstrip(14) -> ToDump(out1.pcap);
