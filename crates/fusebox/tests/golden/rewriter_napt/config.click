// SNF Fig. 5 NAPT. IPRewriter input 0: `pattern 10.0.0.1 1000-9000 - - 0 1` (source NAT;
// a source port already in 1000-9000 and free is kept); input 1 (TCP): destination
// rewritten to 10.1.1.2. Replies match the reverse mappings and leave on output 1.
// Non-TCP/UDP packets on a non-`pass` input are dropped.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> c :: Classifier(9/06, -);
rw :: IPRewriter(pattern 10.0.0.1 1000-9000 - - 0 1, pattern - - 10.1.1.2 - 0 1);
c[0] -> [1]rw;
c[1] -> [0]rw;
rw[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> ToDump(out0.pcap);
rw[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:fd) -> ToDump(out1.pcap);
