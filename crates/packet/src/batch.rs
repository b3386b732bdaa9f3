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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_to_capacity_and_drains_in_order() {
        let mut b = Batch::with_capacity(3);
        for i in 0..3u8 {
            assert!(b.push(Packet::from_bytes(&[i])).is_ok());
        }
        assert!(b.is_full());
        let back = b.push(Packet::from_bytes(&[9])).unwrap_err();
        assert_eq!(back.data(), &[9]);
        let order: Vec<u8> = b.drain().map(|p| p.data()[0]).collect();
        assert_eq!(order, vec![0, 1, 2]);
        assert!(b.is_empty());
        assert_eq!(Batch::with_capacity(0).capacity(), 1);
        assert_eq!(DEFAULT_BATCH_SIZE, 32);
    }
}
