// RoundRobinSwitch sends packet 1 to output 0, packet 2 to output 1, ... cycling.
FromDump(input.pcap) -> rr :: RoundRobinSwitch;
rr[0] -> ToDump(out0.pcap);
rr[1] -> ToDump(out1.pcap);
rr[2] -> ToDump(out2.pcap);
