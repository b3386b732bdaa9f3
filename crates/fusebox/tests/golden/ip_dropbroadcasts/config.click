// Click's FromDump sets no packet type (only FromDevice reads the destination MAC), so the
// plain path (t[1]) lets broadcast and multicast frames through DropBroadcasts. On t[0] a
// Classifier marks them with SetPacketType, as FromDevice would; DropBroadcasts sends them
// to its output 1, which is connected.
t :: Tee;
c :: Classifier(0/ffffffffffff, 0/01%01, -);
d :: DropBroadcasts;
FromDump(input.pcap) -> t;
t[0] -> c;
c[0] -> SetPacketType(BROADCAST) -> d;
c[1] -> SetPacketType(MULTICAST) -> d;
c[2] -> d;
d[0] -> ToDump(out0.pcap);
d[1] -> ToDump(out1.pcap);
t[1] -> DropBroadcasts -> ToDump(out2.pcap);
