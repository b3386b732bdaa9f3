// Click's rewriters on TCP and UDP first fragments with a short transport part (issue 16):
// fewer than 8 bytes are dropped; TCP with 8-17 bytes is mapped by its ports, and
// IPRewriter rewrites only its addresses and IP checksum (ports, TCP checksum and TCP state
// stay), UDPRewriter its ports too; from 18 bytes in full. expected.txt is Click's output.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> c :: IPClassifier(dst port 80, -);
ip :: IPRewriter(pattern 10.0.0.1 5000-5099# - - 0 0);
u :: UDPRewriter(pattern 10.0.0.2 6000-6099# - - 0 0);
c[0] -> ip;
c[1] -> u;
ip[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> ToDump(out0.pcap);
u[0] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:fd) -> ToDump(out1.pcap);
