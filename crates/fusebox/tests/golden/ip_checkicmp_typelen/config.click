// CheckICMPHeader's per-type length rules (Click checkicmpheader.cc): error messages
// (unreachable, time exceeded, parameter problem, source quench, redirect) need 8 + 28
// bytes (the quoted IP header and 64 bits of data), timestamp and timestamp reply exactly
// 20 bytes, information request and reply exactly 8; other types at least 8. Packets that
// break them are dropped (output 1 unconnected) even with a correct checksum.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> CheckICMPHeader
  -> Unstrip(14)
  -> ToDump(out0.pcap);
