// Zeroed IP and TCP checksums are recomputed by SetIPChecksum and SetTCPChecksum.
FromDump(input.pcap)
  -> Strip(14)
  -> MarkIPHeader
  -> SetIPChecksum
  -> SetTCPChecksum
  -> Unstrip(14)
  -> ToDump(out0.pcap);
