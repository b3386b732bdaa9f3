// DecIPTTL's expired packets (output 1) become ICMP time-exceeded errors from 10.0.0.1;
// ICMPError sets the "fix IP source" annotation on them (SET_FIX_ANNO defaults to true),
// so FixIPSrc rewrites their source to 192.0.2.1 and recomputes the IP header checksum.
// Forwarded packets carry no such annotation and pass FixIPSrc unchanged (TTL already
// decremented by DecIPTTL). No error for an expired ICMP error message.
FromDump(input.pcap)
  -> Strip(14)
  -> CheckIPHeader
  -> dt :: DecIPTTL;
dt[0] -> fix :: FixIPSrc(192.0.2.1)
  -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:fe)
  -> ToDump(out0.pcap);
dt[1] -> ICMPError(10.0.0.1, timeexceeded) -> fix;
