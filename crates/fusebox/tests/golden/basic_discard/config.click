// Discard drops every packet it receives; the Tee's other copy is written out.
FromDump(input.pcap) -> t :: Tee;
t[0] -> ToDump(out0.pcap);
t[1] -> Discard;
