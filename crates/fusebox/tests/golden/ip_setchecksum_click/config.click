// Transport checksums as Click computes them (see make_input.py for each packet):
// SetUDPChecksum measures by the UDP length field, sends fragments and short datagrams to
// output 1 and checks no protocol; SetTCPChecksum checks no protocol either and kills
// packets with fewer than 20 transport bytes. Both put the IP header's protocol and a
// source route's final destination into the pseudo header.
FromDump(input.pcap) -> Strip(14) -> MarkIPHeader -> t :: Tee;
t[0] -> u :: SetUDPChecksum -> Unstrip(14) -> ToDump(out0.pcap);
u[1] -> Unstrip(14) -> ToDump(out1.pcap);
t[1] -> SetTCPChecksum -> Unstrip(14) -> ToDump(out2.pcap);
