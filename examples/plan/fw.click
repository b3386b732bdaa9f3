// A stateless firewall: no telnet, nothing to 10.0.0.0/8 from outside it.
FromDevice(eth0)
  -> MarkIPHeader(14)
  -> IPFilter(deny tcp dst port 23, deny dst net 10.0.0.0/8 && not src net 10.0.0.0/8, allow all)
  -> ToDevice(eth1);
