// Queues, unqueuers and Null pass packets through unchanged and in order (run to
// completion: a queue never holds a packet).
FromDump(input.pcap)
  -> Queue(10)
  -> Unqueue
  -> Null
  -> SimpleQueue
  -> Unqueue(BURST 4)
  -> Print(seen)
  -> ToDump(out0.pcap);
