// Classifier: ARP requests (ethertype 0806, ARP op 1) to output 0; IPv4 UDP (ethertype 0800,
// IP protocol 17 at byte 23) to output 1; frames whose byte 12 is 08 (mask ff00) and whose
// byte 13 is not 06 (so IPv4, not ARP) to output 2. The ARP reply and the IPv6 frame match no
// pattern and are dropped (no-match).
FromDump(input.pcap)
  -> c :: Classifier(12/0806 20/0001, 12/0800 23/11, 12/0800%ff00 !13/06);
c[0] -> ToDump(out0.pcap);
c[1] -> ToDump(out1.pcap);
c[2] -> ToDump(out2.pcap);
