//! Bytestream operators: `window` (TCP reassembly) and `packetize`.
