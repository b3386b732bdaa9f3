//! One direction of a TCP connection as a byte stream: segments in, contiguous bytes out.

use std::collections::BTreeMap;

/// How far ahead of the next expected byte a segment may start and still be buffered
/// (1 GiB, a quarter of the sequence space): a segment further ahead is taken for garbage
/// and counted in [`ReassemblyStats::out_of_window`]. (Sequence numbers compare modulo 2^32
/// in a signed half-space: up to 2^31 behind the next expected byte is old data.)
pub const MAX_AHEAD: u64 = 1 << 30;

/// Default bound of out-of-order bytes buffered per stream ([`Reassembler::new`]).
pub const DEFAULT_BUFFER_LIMIT: usize = 256 * 1024;

/// What the reassembler hands on, in stream order: bytes, or a hole it gave up on.
///
/// Offsets are stream offsets: bytes since the stream's first byte (the byte after the SYN,
/// or the first byte of the first segment seen when the SYN was not), counted in 64 bits, so
/// they keep growing across the wrap of the 32-bit sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery<'a> {
    /// Bytes `offset .. offset + bytes.len()` of the stream, each delivered once.
    Data {
        /// Stream offset of `bytes[0]`.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// Bytes `offset .. offset + len` were skipped: never seen, and given up on.
    Gap {
        /// Stream offset of the first missing byte.
        offset: u64,
        /// Number of missing bytes.
        len: u64,
        /// Why the hole was skipped.
        cause: GapCause,
    },
}

/// Why a hole in a stream was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GapCause {
    /// Buffering the out-of-order data after the hole would have passed the stream's bound.
    Overflow,
    /// The other direction acknowledged bytes after the hole: the receiver saw them, the
    /// capture did not (Wireshark's "bytes missing in capture file").
    Acked,
    /// The stream was closed (FIN not reachable, RST, timeout, flush) with data after a hole.
    Close,
}

/// What one segment was, as [`Reassembler::segment`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// No payload (a pure ACK, a SYN, a bare FIN).
    Empty,
    /// It started at or before the next expected byte and brought new bytes.
    InOrder,
    /// It started after the next expected byte and was buffered.
    OutOfOrder,
    /// Every byte of it had already been delivered (a retransmission).
    Duplicate,
    /// Too far ahead or behind to be this stream's ([`MAX_AHEAD`]); ignored.
    OutOfWindow,
    /// The stream had already ended; ignored.
    Closed,
}

/// Counters of one stream (or, summed, of every stream of a [`super::Window`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ReassemblyStats {
    /// Segments seen.
    pub segments: u64,
    /// Segments that brought new bytes in order.
    pub in_order: u64,
    /// Segments buffered out of order.
    pub out_of_order: u64,
    /// Segments with payload of which every byte had been delivered already.
    pub duplicates: u64,
    /// Segments too far from the stream's position to belong to it.
    pub out_of_window: u64,
    /// Segments that arrived after the stream ended.
    pub after_close: u64,
    /// Bytes delivered (each stream byte at most once).
    pub bytes: u64,
    /// Times the out-of-order buffer was full: each made the reassembler skip holes.
    pub overflows: u64,
    /// Holes skipped (overflow, acknowledged-but-missing, or at close).
    pub holes_skipped: u64,
    /// Bytes in the skipped holes.
    pub bytes_skipped: u64,
    /// Buffered bytes dropped because they lay after the FIN.
    pub bytes_after_fin: u64,
}

impl ReassemblyStats {
    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &ReassemblyStats) {
        self.segments += other.segments;
        self.in_order += other.in_order;
        self.out_of_order += other.out_of_order;
        self.duplicates += other.duplicates;
        self.out_of_window += other.out_of_window;
        self.after_close += other.after_close;
        self.bytes += other.bytes;
        self.overflows += other.overflows;
        self.holes_skipped += other.holes_skipped;
        self.bytes_skipped += other.bytes_skipped;
        self.bytes_after_fin += other.bytes_after_fin;
    }
}

/// Reorders the segments of one direction of a TCP connection into its byte stream.
///
/// * **Start.** The stream starts at the first segment seen: after its SYN when it has one
///   (the SYN takes one sequence number), at its first byte otherwise (a capture started
///   mid-connection). Bytes before that point are old and dropped.
/// * **Order.** Sequence numbers are compared modulo 2^32 relative to the next expected
///   byte, so streams cross the wrap of the sequence space; offsets are 64-bit.
/// * **Overlaps.** Each byte is delivered once. Whenever the next expected byte is covered
///   by a received segment, the earliest received of the segments covering it supplies the
///   bytes up to its own end (a segment arriving in order is taken whole). So delivered bytes
///   are never replaced, a retransmission adds only what is new, and for overlapping
///   out-of-order segments the first received wins at the point where they join the stream:
///   the rule of Wireshark's "Follow TCP stream", which prints each byte once.
/// * **Bound.** At most `limit` bytes of out-of-order segments are buffered. A segment that
///   would pass the bound makes the stream give up on its first hole: the hole is skipped
///   (a [`Delivery::Gap`] with [`GapCause::Overflow`]), the buffered data after it is
///   delivered, and so on until the segment fits or is in order. Each such segment counts
///   one overflow.
/// * **Missing in the capture.** [`Reassembler::acked`]: when the other direction
///   acknowledges a byte after a hole, the hole is skipped ([`GapCause::Acked`]).
/// * **End.** A FIN marks where the stream ends; [`Reassembler::finished`] turns true
///   once every byte before it has been delivered. [`Reassembler::close`] ends the stream
///   at once, skipping holes and delivering what is buffered.
#[derive(Debug, Clone)]
pub struct Reassembler {
    limit: usize,
    started: bool,
    closed: bool,
    /// Sequence number of the SYN, when one was seen.
    isn: Option<u32>,
    /// Sequence number of the next expected byte.
    next_seq: u32,
    /// Stream offset of the next expected byte.
    next: u64,
    /// Stream offset of the FIN (the offset after the last byte).
    fin: Option<u64>,
    /// Out-of-order segments by (start offset, arrival number); they may overlap.
    ooo: BTreeMap<(u64, u64), Vec<u8>>,
    arrivals: u64,
    buffered: usize,
    stats: ReassemblyStats,
}

impl Default for Reassembler {
    fn default() -> Self {
        Reassembler::new(DEFAULT_BUFFER_LIMIT)
    }
}

impl Reassembler {
    /// A stream that buffers at most `limit` bytes of out-of-order data.
    pub fn new(limit: usize) -> Reassembler {
        Reassembler {
            limit,
            started: false,
            closed: false,
            isn: None,
            next_seq: 0,
            next: 0,
            fin: None,
            ooo: BTreeMap::new(),
            arrivals: 0,
            buffered: 0,
            stats: ReassemblyStats::default(),
        }
    }

    /// Whether a segment has been seen.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The sequence number of the SYN, if one was seen.
    pub fn isn(&self) -> Option<u32> {
        self.isn
    }

    /// Stream offset of the next expected byte (bytes delivered plus bytes skipped).
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// Sequence number of the next expected byte.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Out-of-order bytes buffered now.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Whether the stream has ended: its FIN was reached or it was closed.
    pub fn finished(&self) -> bool {
        self.closed || self.fin.is_some_and(|f| self.next >= f)
    }

    /// This stream's counters.
    pub fn stats(&self) -> &ReassemblyStats {
        &self.stats
    }

    /// Stream offset of sequence number `seq`, relative to the next expected byte (signed
    /// distance modulo 2^32); negative before the stream's start.
    fn offset_of(&self, seq: u32) -> i64 {
        let rel = i64::from(seq.wrapping_sub(self.next_seq) as i32);
        self.next as i64 + rel
    }

    /// Takes one segment: its sequence number, SYN and FIN flags and payload. Bytes that
    /// become contiguous are handed to `sink` in order.
    pub fn segment<F: FnMut(Delivery<'_>)>(
        &mut self,
        seq: u32,
        syn: bool,
        fin: bool,
        payload: &[u8],
        sink: &mut F,
    ) -> SegmentKind {
        self.stats.segments += 1;
        if self.finished() {
            self.stats.after_close += 1;
            return SegmentKind::Closed;
        }
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        if !self.started {
            self.started = true;
            self.next_seq = data_seq;
        }
        if syn && self.isn.is_none() {
            self.isn = Some(seq);
        }
        let start = self.offset_of(data_seq);
        let end = start + payload.len() as i64;
        let next = self.next as i64;
        if start > next + MAX_AHEAD as i64 {
            self.stats.out_of_window += 1;
            return SegmentKind::OutOfWindow;
        }
        if fin && self.fin.is_none() && end >= next {
            self.fin = Some(end as u64);
        }
        if payload.is_empty() {
            SegmentKind::Empty
        } else if end <= next {
            self.stats.duplicates += 1;
            SegmentKind::Duplicate
        } else {
            // From here on `end > next >= 0`.
            self.place(start, payload, sink)
        }
    }

    /// Places a segment that ends after the next expected byte.
    fn place<F: FnMut(Delivery<'_>)>(
        &mut self,
        start: i64,
        payload: &[u8],
        sink: &mut F,
    ) -> SegmentKind {
        let end = start + payload.len() as i64;
        let mut overflowed = false;
        loop {
            let next = self.next as i64;
            if end <= next {
                // Skipping holes delivered buffered bytes past all of it.
                return SegmentKind::OutOfOrder;
            }
            if start <= next {
                let from = (next - start) as usize;
                self.deliver(&payload[from..], sink);
                self.drain(sink);
                return if overflowed {
                    SegmentKind::OutOfOrder
                } else {
                    self.stats.in_order += 1;
                    SegmentKind::InOrder
                };
            }
            if self.buffered + payload.len() <= self.limit {
                self.arrivals += 1;
                self.ooo
                    .insert((start as u64, self.arrivals), payload.to_vec());
                self.buffered += payload.len();
                self.stats.out_of_order += 1;
                return SegmentKind::OutOfOrder;
            }
            if !overflowed {
                overflowed = true;
                self.stats.overflows += 1;
                self.stats.out_of_order += 1;
            }
            // Give up on the first hole: before the lowest buffered segment, or, with
            // nothing buffered (the segment alone is over the bound), before this one.
            let target = match self.ooo.keys().next() {
                Some(&(s, _)) if (s as i64) < start => s,
                _ => start as u64,
            };
            self.skip_to(target, GapCause::Overflow, sink);
            self.drain(sink);
        }
    }

    /// Delivers `bytes` at the next expected byte.
    fn deliver<F: FnMut(Delivery<'_>)>(&mut self, bytes: &[u8], sink: &mut F) {
        if bytes.is_empty() {
            return;
        }
        sink(Delivery::Data {
            offset: self.next,
            bytes,
        });
        self.next += bytes.len() as u64;
        self.next_seq = self.next_seq.wrapping_add(bytes.len() as u32);
        self.stats.bytes += bytes.len() as u64;
    }

    /// Skips the hole from the next expected byte to `target`.
    fn skip_to<F: FnMut(Delivery<'_>)>(&mut self, target: u64, cause: GapCause, sink: &mut F) {
        if target <= self.next {
            return;
        }
        let len = target - self.next;
        sink(Delivery::Gap {
            offset: self.next,
            len,
            cause,
        });
        self.next = target;
        self.next_seq = self.next_seq.wrapping_add(len as u32);
        self.stats.holes_skipped += 1;
        self.stats.bytes_skipped += len;
    }

    /// Delivers buffered segments that the next expected byte has reached: each time, the
    /// earliest received of those covering it supplies bytes up to its end; those wholly
    /// behind it are dropped.
    fn drain<F: FnMut(Delivery<'_>)>(&mut self, sink: &mut F) {
        loop {
            let next = self.next;
            let mut best: Option<(u64, u64)> = None;
            for (&(s, a), v) in self.ooo.range(..=(next, u64::MAX)) {
                if s + v.len() as u64 > next && best.is_none_or(|(_, ba)| a < ba) {
                    best = Some((s, a));
                }
            }
            let Some(key) = best else {
                // Everything at or before `next` is behind it.
                while let Some(e) = self.ooo.first_entry() {
                    if e.key().0 > next {
                        break;
                    }
                    self.buffered -= e.get().len();
                    e.remove();
                }
                return;
            };
            if let Some(v) = self.ooo.remove(&key) {
                self.buffered -= v.len();
                let from = (next - key.0) as usize;
                self.deliver(&v[from..], sink);
            }
        }
    }

    /// The other direction acknowledged up to `ack`: holes before an acknowledged byte
    /// were seen by the receiver but not by us, and are skipped ([`GapCause::Acked`]).
    /// Returns whether a hole was skipped.
    pub fn acked<F: FnMut(Delivery<'_>)>(&mut self, ack: u32, sink: &mut F) -> bool {
        if !self.started || self.finished() {
            return false;
        }
        let ack_off = self.offset_of(ack);
        let mut skipped = false;
        while let Some(&(lowest, _)) = self.ooo.keys().next() {
            if ack_off <= lowest as i64 {
                break;
            }
            self.skip_to(lowest, GapCause::Acked, sink);
            self.drain(sink);
            skipped = true;
        }
        skipped
    }

    /// Ends the stream now: holes are skipped ([`GapCause::Close`]) and the buffered bytes
    /// delivered, except bytes after the FIN, which are dropped
    /// ([`ReassemblyStats::bytes_after_fin`]).
    pub fn close<F: FnMut(Delivery<'_>)>(&mut self, sink: &mut F) {
        if self.closed {
            return;
        }
        while !self.finished() {
            let Some(&(lowest, _)) = self.ooo.keys().next() else {
                break;
            };
            if let Some(f) = self.fin {
                if lowest >= f {
                    break;
                }
            }
            self.skip_to(lowest, GapCause::Close, sink);
            self.drain(sink);
        }
        for v in self.ooo.values() {
            self.stats.bytes_after_fin += v.len() as u64;
        }
        self.ooo.clear();
        self.buffered = 0;
        self.closed = true;
    }
}
