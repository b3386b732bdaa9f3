// TCPRewriter and UDPRewriter with `pattern` input specs naming AddressInfo addresses and
// IPRewriterPatterns patterns. tr input 0 (`snat`): source becomes pub, source port from
// 1024-65535 (no suffix: the packet's own port is kept when it is in range and free).
// tr input 1 (`toweb`, TCP to port 80): destination becomes web:8080. ur: source becomes
// pub, port from 5000-6000. Replies enter the same inputs and match the reverse mappings
// (looked up before the input spec applies): they leave on output 1 with the original
// addresses restored. A UDP checksum of 0 stays 0. UDPRewriter drops ICMP (not TCP/UDP).
AddressInfo(pub 203.0.113.1, web 10.1.1.2);
IPRewriterPatterns(snat pub 1024-65535 - -, toweb - - web 8080);
tr :: TCPRewriter(pattern snat 0 1, pattern toweb 0 1);
ur :: UDPRewriter(pattern pub 5000-6000 - - 0 1);
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> c :: IPClassifier(tcp dst port 80, tcp, -);
c[0] -> [1]tr;
c[1] -> [0]tr;
c[2] -> ur;
tr[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> fwd :: ToDump(out0.pcap);
tr[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:fd) -> rep :: ToDump(out1.pcap);
ur[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe) -> fwd;
ur[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:fd) -> rep;
