// SpeedyBox's IDS NF: check the IPv4 header, then match Snort rules over the payloads.
// Alerts are counted per element in the run's summary and listed in the element's state
// (`fusebox verify` compares them); add `ALERTS FILE` to write Snort's fast alert lines.
FromDevice(eth0)
  -> CheckIPHeader(14)
  -> ids :: SnortIDS(ids.rules, VAR HOME_NET 10.0.0.0/8, VAR HTTP_PORTS [80,8080])
  -> ToDevice(eth1);
