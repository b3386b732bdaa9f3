// The Click counterpart of ttl.toml: examples/ttl/ttl.click with its devices named as
// `fusebox synth --click` names the chain's (NF_IFACE), so that
//   fusebox verify examples/bricks/ttl.toml --input ttl.eth0=trace.pcap \
//     --against examples/bricks/click/ttl.click
// compares the two.
c :: Classifier(12/0800, -);
FromDevice(ttl_eth0) -> c;
c[0] -> MarkIPHeader(14) -> DecIPTTL -> ToDevice(ttl_eth1);
c[1] -> Discard;
