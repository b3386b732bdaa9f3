// Packets are painted 3, 4, 5 in turn. CheckPaint(3) sends paint 3 to output 0 and the
// rest to output 1; CheckPaint(4), with one output, passes paint 4 and drops the others.
FromDump(input.pcap) -> rr :: RoundRobinSwitch;
cp :: CheckPaint(3);
rr[0] -> Paint(3) -> cp;
rr[1] -> Paint(4) -> cp;
rr[2] -> Paint(5) -> cp;
cp[0] -> ToDump(out0.pcap);
cp[1] -> CheckPaint(4) -> ToDump(out1.pcap);
