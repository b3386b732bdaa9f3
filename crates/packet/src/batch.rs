//! Batches of packets.

use crate::Packet;

/// The default number of packets processed together.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// A batch of packets, moved as a whole.
#[derive(Debug, Default)]
pub struct Batch {
    packets: Vec<Packet>,
    capacity: usize,
}

impl Batch {
    /// An empty batch that holds up to `capacity` packets.
    pub fn with_capacity(capacity: usize) -> Batch {
        let capacity = capacity.max(1);
        Batch {
            packets: Vec::with_capacity(capacity),
            capacity,
        }
    }
    /// Adds a packet; returns it back if the batch is full.
    pub fn push(&mut self, p: Packet) -> Result<(), Packet> {
        if self.packets.len() >= self.capacity {
            return Err(p);
        }
        self.packets.push(p);
        Ok(())
    }
    /// True when no more packets fit.
    pub fn is_full(&self) -> bool {
        self.packets.len() >= self.capacity
    }
    /// Number of packets.
    pub fn len(&self) -> usize {
        self.packets.len()
    }
    /// True when the batch holds no packets.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
    /// Maximum number of packets.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Takes the packets out, in order, leaving the batch empty.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Packet> {
        self.packets.drain(..)
    }
    /// The packets, in order.
    pub fn packets(&self) -> &[Packet] {
        &self.packets
    }
}
