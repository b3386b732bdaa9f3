// A probe: counts packets and bytes.
FromDevice(eth0) -> Counter -> ToDevice(eth1);
