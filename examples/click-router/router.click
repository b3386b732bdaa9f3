// The IP router of the Click paper (Kohler et al., TOCS 2000, Fig. 8), as shipped in Click's
// conf/ directory: two interfaces, ARP, IP header checks, route lookup, the standard
// forwarding path (DropBroadcasts, PaintTee for redirects, IPGWOptions, FixIPSrc, DecIPTTL,
// IPFragmenter) and ICMP errors. Runs unchanged in FuseBox; ToHost is an exit named `host`.
//   eth0: 18.26.4.24/24, 00:00:c0:ae:67:ef
//   eth1: 1.0.0.1/8,     00:00:c0:ca:68:ef

// Shared IP input path and routing table
ip :: Strip(14)
    -> CheckIPHeader(INTERFACES 18.26.4.24/24 1.0.0.1/8)
    -> rt :: StaticIPLookup(
        18.26.4.24/32 0,
        18.26.4.255/32 0,
        18.26.4.0/32 0,
        1.0.0.1/32 0,
        1.255.255.255/32 0,
        1.0.0.0/32 0,
        255.255.255.255/32 0,
        0.0.0.0/32 0,
        18.26.4.0/24 1,
        1.0.0.0/8 2,
        0.0.0.0/0 18.26.4.1 1);

// ARP responses are copied to each ARPQuerier and the host.
arpt :: Tee(3);

// Input and output paths for eth0
c0 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice(eth0) -> c0;
out0 :: Queue(200) -> todevice0 :: ToDevice(eth0);
c0[0] -> ar0 :: ARPResponder(18.26.4.24 00:00:c0:ae:67:ef) -> out0;
arpq0 :: ARPQuerier(18.26.4.24, 00:00:c0:ae:67:ef) -> out0;
c0[1] -> arpt;
arpt[0] -> [1]arpq0;
c0[2] -> Paint(1) -> ip;
c0[3] -> Print("eth0 non-IP") -> Discard;

// Input and output paths for eth1
c1 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice(eth1) -> c1;
out1 :: Queue(200) -> todevice1 :: ToDevice(eth1);
c1[0] -> ar1 :: ARPResponder(1.0.0.1 00:00:c0:ca:68:ef) -> out1;
arpq1 :: ARPQuerier(1.0.0.1, 00:00:c0:ca:68:ef) -> out1;
c1[1] -> arpt;
arpt[1] -> [1]arpq1;
c1[2] -> Paint(2) -> ip;
c1[3] -> Print("eth1 non-IP") -> Discard;

// Local delivery
toh :: ToHost;
arpt[2] -> toh;
rt[0] -> EtherEncap(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> toh;

// Forwarding path for eth0
rt[1] -> DropBroadcasts
    -> cp0 :: PaintTee(1)
    -> gio0 :: IPGWOptions(18.26.4.24)
    -> FixIPSrc(18.26.4.24)
    -> dt0 :: DecIPTTL
    -> fr0 :: IPFragmenter(1500)
    -> [0]arpq0;
dt0[1] -> ICMPError(18.26.4.24, timeexceeded) -> rt;
fr0[1] -> ICMPError(18.26.4.24, unreachable, needfrag) -> rt;
gio0[1] -> ICMPError(18.26.4.24, parameterproblem) -> rt;
cp0[1] -> ICMPError(18.26.4.24, redirect, host) -> rt;

// Forwarding path for eth1
rt[2] -> DropBroadcasts
    -> cp1 :: PaintTee(2)
    -> gio1 :: IPGWOptions(1.0.0.1)
    -> FixIPSrc(1.0.0.1)
    -> dt1 :: DecIPTTL
    -> fr1 :: IPFragmenter(1500)
    -> [0]arpq1;
dt1[1] -> ICMPError(1.0.0.1, timeexceeded) -> rt;
fr1[1] -> ICMPError(1.0.0.1, unreachable, needfrag) -> rt;
gio1[1] -> ICMPError(1.0.0.1, parameterproblem) -> rt;
cp1[1] -> ICMPError(1.0.0.1, redirect, host) -> rt;
