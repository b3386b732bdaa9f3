// IPGWOptions(10.0.0.100) records 10.0.0.100 in a Record Route option with room and
// advances its pointer (checksum recomputed); packets without options or with a full
// option pass untouched; an invalid pointer makes the packet bad (dropped: output 1
// unconnected).
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> IPGWOptions(10.0.0.100)
  -> Unstrip(14)
  -> ToDump(out0.pcap);
