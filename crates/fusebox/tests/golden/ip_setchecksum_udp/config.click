// Zeroed IP and UDP checksums are recomputed by SetIPChecksum and SetUDPChecksum.
FromDump(input.pcap)
  -> Strip(14)
  -> MarkIPHeader
  -> SetIPChecksum
  -> SetUDPChecksum
  -> Unstrip(14)
  -> ToDump(out0.pcap);
