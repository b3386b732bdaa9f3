// Packets are painted 1, 2 in turn. PaintTee(2) sends every packet out output 0 and a
// copy of those painted 2 out output 1.
FromDump(input.pcap) -> rr :: RoundRobinSwitch;
pt :: PaintTee(2);
rr[0] -> Paint(1) -> pt;
rr[1] -> Paint(2) -> pt;
pt[0] -> ToDump(out0.pcap);
pt[1] -> ToDump(out1.pcap);
