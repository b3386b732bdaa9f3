// Declarative elements (AddressInfo, ScheduleInfo) and switches. IPv4 frames: StaticSwitch(1)
// -> StoreEtherAddress(host, src) (the Ethernet address of AddressInfo name `host`) ->
// Switch (K defaults to 0) -> ThreadSafeQueue -> PullTee: output 0 gets the packet with
// EtherRewrite(router, host) (source router, destination host); output 1 gets a copy,
// re-encapsulated by EtherEncap(0x0800, host, router) whose destination StoreEtherAddress
// then overwrites at byte offset 0. Other frames meet StaticSwitch(-1) and are dropped.
// Idle never emits anything.
AddressInfo(host 10.0.0.1 02:00:00:00:00:aa, router 02:00:00:00:00:bb);
ScheduleInfo(q 2);
FromDump(input.pcap)
  -> c :: Classifier(12/0800, -);
c[0] -> ss :: StaticSwitch(1);
ss[0] -> Discard;
ss[1] -> StoreEtherAddress(host, src)
  -> sw :: Switch;
sw[0] -> q :: ThreadSafeQueue(16)
  -> pt :: PullTee(2)
  -> EtherRewrite(router, host)
  -> ToDump(out0.pcap);
sw[1] -> Discard;
pt[1] -> Strip(14)
  -> EtherEncap(0x0800, host, router)
  -> StoreEtherAddress(02:00:00:00:00:cc, 0)
  -> o1 :: ToDump(out1.pcap);
Idle -> o1;
c[1] -> off :: StaticSwitch(-1) -> Discard;
