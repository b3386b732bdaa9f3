// Counter passes packets unchanged; Tee sends a copy of every packet to each output.
FromDump(input.pcap)
  -> Counter
  -> t :: Tee(2);
t[0] -> ToDump(out0.pcap);
t[1] -> ToDump(out1.pcap);
