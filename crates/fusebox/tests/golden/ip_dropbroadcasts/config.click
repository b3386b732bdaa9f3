// FromDump sets the packet type from the destination MAC; DropBroadcasts drops broadcast
// and multicast frames.
FromDump(input.pcap)
  -> DropBroadcasts
  -> ToDump(out0.pcap);
