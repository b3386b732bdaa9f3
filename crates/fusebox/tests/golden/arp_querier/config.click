// ARPQuerier: a static next hop and the broadcast address are encapsulated at once
// (output 0); an unknown next hop is held and queried with a broadcast ARP request on
// output 1, at most once per 100 ms per address. (No reply arrives: 3 packets stay held.)
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> GetIPAddress(16)
  -> q :: ARPQuerier(10.0.0.1/24, 00:00:00:00:00:0a, STATIC 10.0.0.2 00:00:00:00:00:0b);
q[0] -> ToDump(out0.pcap);
q[1] -> ToDump(out1.pcap);
