// The benchmark peer of signature.toml (not an equivalent: see there): SnortIDS with the
// same rules, matching packet by packet (devices NF_IFACE and the element NF/nf, as the
// chain names them).
FromDevice(sig_eth0)
  -> sig/nf :: SnortIDS(../../speedybox/ids.rules, VAR HOME_NET 10.0.0.0/8, VAR HTTP_PORTS [80,8080])
  -> ToDevice(sig_eth1);
