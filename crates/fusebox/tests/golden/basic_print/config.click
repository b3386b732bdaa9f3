// Print and IPPrint only describe packets (FuseBox: on stderr, and only with
// FUSEBOX_PRINT=1); every packet leaves unchanged, Ethernet padding and non-IP frames
// included. MarkIPHeader(14) gives IPPrint its IP header without checking or trimming.
FromDump(input.pcap)
  -> Print(in)
  -> MarkIPHeader(14)
  -> IPPrint(ip, TTL true, ID true)
  -> Print(out, 64, CONTENTS ascii, TIMESTAMP true)
  -> ToDump(out0.pcap);
