// The Click counterpart of maglev.toml: the Maglev element as examples/speedybox/lb.click
// configures it (devices NF_IFACE, the element NF/nf, for `fusebox verify maglev.toml
// --against`). Frames that are not IPv4 go to Discard, as MaglevNF's parses drop them.
define($TIMEOUT 60s)
lb/nf :: Maglev(BACKEND web1 10.0.1.1 02:00:00:00:01:01, BACKEND web2 10.0.1.2 02:00:00:00:01:02,
                BACKEND web3 10.0.1.3 02:00:00:00:01:03, BACKEND web4 10.0.1.4 02:00:00:00:01:04,
                BACKEND web5 10.0.1.5 02:00:00:00:01:05,
                SCHEDULE ../../speedybox/schedule.txt, TIMEOUT $TIMEOUT);
in0 :: Classifier(12/0800, -);
in1 :: Classifier(12/0800, -);
FromDevice(lb_eth0) -> in0;
FromDevice(lb_eth1) -> in1;
in0[0] -> MarkIPHeader(14) -> [0]lb/nf;
in1[0] -> MarkIPHeader(14) -> [1]lb/nf;
in0[1] -> Discard;
in1[1] -> Discard;
lb/nf[0] -> ToDevice(lb_eth1);
lb/nf[1] -> ToDevice(lb_eth0);
