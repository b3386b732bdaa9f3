// HashSwitch(OFFSET, LENGTH) sums the LENGTH bytes at OFFSET: with 2, 4 or 8 outputs the
// output is (d ^ (d >> 4)) & (n - 1), otherwise d % n; short packets go to output 0.
// h2 hashes the last byte of the IP destination, h3 the whole IP destination.
FromDump(input.pcap) -> t :: Tee(2);
t[0] -> h2 :: HashSwitch(33, 1);
t[1] -> h3 :: HashSwitch(30, 4);
h2[0] -> ToDump(out0.pcap);
h2[1] -> ToDump(out1.pcap);
h3[0] -> ToDump(out2.pcap);
h3[1] -> ToDump(out3.pcap);
h3[2] -> ToDump(out4.pcap);
