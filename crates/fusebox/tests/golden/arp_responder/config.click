// ARPResponder answers ARP requests for its addresses with a new 42-byte ARP reply on
// output 0 (the request is consumed); everything else goes to output 1.
FromDump(input.pcap)
  -> ar :: ARPResponder(10.0.0.1 00:00:00:00:00:0a, 192.168.1.0/24 00:00:00:00:00:0c);
ar[0] -> ToDump(out0.pcap);
ar[1] -> ToDump(out1.pcap);
