// A seed: a compound element, a define, an anonymous element and ports.
elementclass Hop { $mac | input -> DecIPTTL -> EtherEncap(0x0800, $mac, 02:00:00:00:00:02) -> output }
define($M 02:00:00:00:00:01)
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1);
rt[0] -> Hop($M) -> ToDevice(eth1);
rt[1] -> f :: IPFilter(allow tcp dst port 80, deny all) -> Hop($M) -> ToDevice(eth1);
f[1] -> Discard;
