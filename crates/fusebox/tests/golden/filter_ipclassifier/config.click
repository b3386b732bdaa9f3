// IPClassifier after CheckIPHeader(14) (which sets the IP header annotation): TCP SYNs to the
// web port to output 0; UDP or ICMP echo requests to output 1; other packets from 10/8 with a
// TTL above 10 to output 2. The ICMP echo reply and the TTL-5 SSH SYN match no pattern and
// are dropped.
FromDump(input.pcap)
  -> CheckIPHeader(14)
  -> c :: IPClassifier(tcp dst port www and syn,
                       udp or icmp type echo,
                       src net 10.0.0.0/8 and ip ttl > 10);
c[0] -> ToDump(out0.pcap);
c[1] -> ToDump(out1.pcap);
c[2] -> ToDump(out2.pcap);
