// The Click counterpart of firewall.toml: the same access control list as an IPFilter
// (devices named NF_IFACE, for `fusebox verify firewall.toml --against`).
define($RULES ../../isp/acl.rules)
c :: Classifier(12/0800, -);
FromDevice(fw_eth0) -> c;
c[0] -> MarkIPHeader(14) -> IPFilter(FILE $RULES) -> ToDevice(fw_eth1);
c[1] -> Discard;
