// IPFilter after CheckIPHeader(14): the first matching rule decides. Packets from the banned
// host are denied; TCP to ports 22 or 80 go to output 0 (allow); UDP to a port below 1024 to
// output 1; everything else is dropped ("drop all"). All drops count as filter-deny.
FromDump(input.pcap)
  -> CheckIPHeader(14)
  -> f :: IPFilter(deny src host 10.0.0.66,
                   allow tcp dst port 22 or 80,
                   1 udp dst port < 1024,
                   drop all);
f[0] -> ToDump(out0.pcap);
f[1] -> ToDump(out1.pcap);
