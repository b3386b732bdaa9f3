// The Click counterpart of nat.toml: IPRewriter with NatNF's pattern (the next free port
// in order: `#`) and every timeout 30 s, reaped every minute (devices NF_IFACE, the element NF/nf, for
// `fusebox verify nat.toml --against`).
nat/nf :: IPRewriter(pattern 203.0.113.1 50000-65535# - - 0 1, drop,
    TCP_TIMEOUT 30, TCP_DONE_TIMEOUT 30, TCP_NODATA_TIMEOUT 30, UDP_TIMEOUT 30,
    REAP_INTERVAL 60);
in0 :: Classifier(12/0800, -);
in1 :: Classifier(12/0800, -);
FromDevice(nat_eth0) -> in0;
FromDevice(nat_eth1) -> in1;
in0[0] -> MarkIPHeader(14) -> [0]nat/nf;
in1[0] -> MarkIPHeader(14) -> [1]nat/nf;
in0[1] -> Discard;
in1[1] -> Discard;
nat/nf[0] -> ToDevice(nat_eth1);
nat/nf[1] -> ToDevice(nat_eth0);
