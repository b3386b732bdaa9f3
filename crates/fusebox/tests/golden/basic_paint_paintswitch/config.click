// RoundRobinSwitch paints packets 1, 0, 7 in turn; PaintSwitch sends each out the output
// numbered by its paint, and drops paint 7 (no such output).
FromDump(input.pcap) -> rr :: RoundRobinSwitch;
ps :: PaintSwitch;
rr[0] -> Paint(1) -> ps;
rr[1] -> Paint(0) -> ps;
rr[2] -> Paint(COLOR 7) -> ps;
ps[0] -> ToDump(out0.pcap);
ps[1] -> ToDump(out1.pcap);
