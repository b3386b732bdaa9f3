//! The receiver's anti-replay window (RFC 4303 §3.4.3, Appendix A).

/// The sequence numbers a receiver has accepted lately: the highest one (`top`) and, for
/// the `size` numbers ending at it, which were seen. A bitmap of at least `size` bits
/// indexed by sequence number modulo its length (so advancing clears bits instead of
/// shifting them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    size: u64,
    top: u64,
    bits: Vec<u64>,
}

impl ReplayWindow {
    /// A window of `size` packets (0: no replay check) that has seen nothing.
    pub fn new(size: u64) -> ReplayWindow {
        let words = size.div_ceil(64).max(1);
        ReplayWindow {
            size,
            top: 0,
            bits: vec![0; usize::try_from(words).unwrap_or(1)],
        }
    }

    /// The window's size in packets.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The highest sequence number accepted so far (0 before the first).
    pub fn top(&self) -> u64 {
        self.top
    }

    #[inline]
    fn nbits(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    #[inline]
    fn slot(&self, seq: u64) -> (usize, u64) {
        let i = seq % self.nbits();
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    #[inline]
    fn seen(&self, seq: u64) -> bool {
        let (w, m) = self.slot(seq);
        self.bits.get(w).is_some_and(|b| b & m != 0)
    }

    /// Whether `seq` may be accepted: never 0; beyond the top; or inside the window and not
    /// seen yet. Everything passes a window of size 0 (but 0).
    #[inline]
    pub fn check(&self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if self.size == 0 || seq > self.top {
            return true;
        }
        // Too old: at or below the window's left edge.
        if self.top - seq >= self.size {
            return false;
        }
        !self.seen(seq)
    }

    /// Records `seq` as accepted (after its ICV verified), sliding the window when it is
    /// the new top.
    #[inline]
    pub fn accept(&mut self, seq: u64) {
        if seq > self.top {
            if self.size > 0 {
                let ahead = seq - self.top;
                if ahead >= self.nbits() {
                    self.bits.iter_mut().for_each(|b| *b = 0);
                } else {
                    for s in self.top + 1..seq {
                        let (w, m) = self.slot(s);
                        if let Some(b) = self.bits.get_mut(w) {
                            *b &= !m;
                        }
                    }
                }
            }
            self.top = seq;
            if self.size > 0 {
                let (w, m) = self.slot(seq);
                if let Some(b) = self.bits.get_mut(w) {
                    // The slot may hold a number a whole bitmap older: overwrite it.
                    *b |= m;
                }
            }
        } else if self.size > 0 {
            let (w, m) = self.slot(seq);
            if let Some(b) = self.bits.get_mut(w) {
                *b |= m;
            }
        }
    }

    /// The full 64-bit sequence number of a packet carrying the low half `low`, inferred
    /// from the window as RFC 4303 Appendix A2.2 does (for extended sequence numbers);
    /// `None` when it would lie below 0. Needs a window of 1 or more.
    #[inline]
    pub fn infer_esn(&self, low: u32) -> Option<u64> {
        let w = u32::try_from(self.size.max(1)).unwrap_or(u32::MAX);
        let tl = self.top as u32;
        let th = (self.top >> 32) as u32;
        let hi = if tl >= w - 1 {
            // Case A: the window lies within one block of 2^32.
            if low >= tl - (w - 1) {
                Some(th)
            } else {
                th.checked_add(1)
            }
        } else if low >= tl.wrapping_sub(w - 1) {
            // Case B: the window spans two blocks; `low` is in the lower one's end.
            th.checked_sub(1)
        } else {
            Some(th)
        }?;
        Some(u64::from(hi) << 32 | u64::from(low))
    }

    /// The window as text: its size, top and the seen numbers within it (as offsets below
    /// the top), for state dumps.
    pub fn describe(&self) -> String {
        let mut seen = Vec::new();
        if self.size > 0 {
            for back in 0..self.size.min(self.top) {
                if self.seen(self.top - back) {
                    seen.push(back);
                }
            }
        }
        let n = seen.len();
        // Runs of offsets, `a-b`, to keep lines short.
        let mut runs: Vec<String> = Vec::new();
        let mut i = 0;
        while i < n {
            let mut j = i;
            while j + 1 < n && seen[j + 1] == seen[j] + 1 {
                j += 1;
            }
            runs.push(if i == j {
                seen[i].to_string()
            } else {
                format!("{}-{}", seen[i], seen[j])
            });
            i = j + 1;
        }
        format!(
            "window {} top {} seen-below-top [{}]",
            self.size,
            self.top,
            runs.join(",")
        )
    }
}
