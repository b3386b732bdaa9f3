//! A tree's batch lookup in AVX-512 registers (x86-64 only; used when the CPU has AVX-512F
//! at run time, the classifier's bounds and the block's keys fit `u32`, and there are at
//! most 8 fields).
//!
//! **Walk.** Keys go sixteen to a register, and the (up to four) registers of a block are
//! stepped together so that their gathers overlap. Per step and register: two 16-lane
//! gathers (each key's node's cut; its right child with the field slot packed above it),
//! one for each key's value of that field, an unsigned compare and a masked blend. Nodes
//! are mirrored as `[u32; 2]` ([`walk_entry`](crate::walk_entry)); keys as a field-major
//! table of `u32` (64 keys per field slot, slot 15 all `u32::MAX`).
//!
//! **Leaves.** One rule's fields in one step: its `(low, high)` pairs loaded as up to 16
//! `u32` lanes (a masked load) and compared with the key's values, each twice
//! (`[k0, k0, k1, k1, ...]`): greater-or-equal on the even lanes, less-or-equal on the odd
//! ones, so one branch per rule instead of one per field.

#![allow(unsafe_code)]

use crate::{leaf_span, Flat, Tree, BATCH, LEAF};
use std::arch::x86_64::{
    __m512i, _mm512_add_epi32, _mm512_and_si512, _mm512_cmpgt_epu32_mask, _mm512_cmpneq_epi32_mask,
    _mm512_i32gather_epi32, _mm512_loadu_si512, _mm512_mask_blend_epi32,
    _mm512_mask_cmpge_epu32_mask, _mm512_mask_cmple_epu32_mask, _mm512_maskz_loadu_epi32,
    _mm512_min_epu32, _mm512_set1_epi32, _mm512_slli_epi32, _mm512_srli_epi32, _mm512_storeu_si512,
};

// A leaf's ranges are read as `u32`s in the order low, high.
const _: () =
    assert!(std::mem::offset_of!((u32, u32), 0) == 0 && std::mem::offset_of!((u32, u32), 1) == 4);

/// Whether this CPU can run [`tree`].
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// The keys of a block as [`tree`] reads them (one buffer for all the blocks of a
/// batch: each block overwrites the entries its keys use).
pub(crate) struct Keys {
    /// `table[slot * 64 + i]`: field `slot` of key `i` (slot 15: `u32::MAX`).
    table: [u32; 16 * BATCH],
    /// `pairs[i]`: key `i`'s values, each twice (`[k0, k0, k1, k1, ...]`).
    pairs: [[u32; 16]; BATCH],
}

impl Default for Keys {
    fn default() -> Keys {
        Keys {
            table: [u32::MAX; 16 * BATCH],
            pairs: [[0; 16]; BATCH],
        }
    }
}

impl Keys {
    /// Takes the first `dims` (at most 8) values of each of `keys` (at most [`BATCH`]);
    /// false (the buffer then unusable until the next fill) when one does not fit `u32`.
    pub(crate) fn fill<K: AsRef<[u64]>>(&mut self, keys: &[K], dims: usize) -> bool {
        let mut fits = true;
        for (i, (k, p)) in keys.iter().zip(&mut self.pairs).enumerate() {
            for (s, (&v, pair)) in k
                .as_ref()
                .iter()
                .zip(p.chunks_exact_mut(2))
                .enumerate()
                .take(dims.min(8))
            {
                fits &= v <= u64::from(u32::MAX);
                self.table[s * BATCH + i] = v as u32;
                pair[0] = v as u32;
                pair[1] = v as u32;
            }
        }
        fits && keys.len() <= BATCH
    }

    /// Key `i`'s values (as filled).
    pub(crate) fn key(&self, i: usize) -> Vec<u64> {
        self.pairs.get(i).map_or(Vec::new(), |p| {
            p.iter().step_by(2).map(|&v| u64::from(v)).collect()
        })
    }
}

/// Looks up the keys `idx` (indices into `keys`) in tree `t` (`dims` fields, 1 to 8; leaf
/// ranges `u32`; `t.walk` in step with `t.nodes`) and lowers `best[i]` to the first rule
/// key `i` matches there, if that is lower. Returns false, having done nothing, when the
/// tree or `dims` do not fit (no walk form, 2^27 nodes or more, more than 8 fields).
///
/// Callers must have checked [`available`] (the code is compiled for AVX-512F).
pub(crate) fn tree(
    t: &Tree,
    dims: usize,
    keys: &Keys,
    idx: &[u8],
    best: &mut [usize; BATCH],
) -> bool {
    debug_assert!(available());
    if t.walk.is_empty()
        || t.walk.len() >= 1 << 27
        || !(1..=8).contains(&dims)
        || !matches!(t.leaf_flat, Flat::Narrow(_))
        || idx.len() > BATCH
    {
        return false;
    }
    // SAFETY: `tree_avx512` only needs AVX-512F, which callers have checked is present
    // (`available`, asserted above in debug builds); its other preconditions (a non-empty
    // walk of fewer than 2^27 entries, 1 to 8 fields, at most 64 keys) were checked above.
    unsafe { tree_avx512(t, dims, keys, idx, best) };
    true
}

#[target_feature(enable = "avx512f")]
fn tree_avx512(t: &Tree, dims: usize, keys: &Keys, idx: &[u8], best: &mut [usize; BATCH]) {
    let Some(&last) = idx.last() else {
        return;
    };
    // Lanes past the keys repeat the last one.
    let mut which = [u32::from(last); BATCH];
    for (w, &i) in which.iter_mut().zip(idx) {
        *w = u32::from(i);
    }
    let mut leaf = [0u32; BATCH];
    match idx.len().div_ceil(16) {
        1 => walk::<1>(&t.walk, &keys.table, &which, &mut leaf),
        2 => walk::<2>(&t.walk, &keys.table, &which, &mut leaf),
        3 => walk::<3>(&t.walk, &keys.table, &which, &mut leaf),
        _ => walk::<4>(&t.walk, &keys.table, &which, &mut leaf),
    }
    let Flat::Narrow(flat) = &t.leaf_flat else {
        return;
    };
    // The lanes of one rule: 2 * dims <= 16.
    let m = ((1u32 << (2 * dims)) - 1) as u16;
    for (&nl, &i) in leaf.iter().zip(idx) {
        let i = i as usize % BATCH;
        let Some(node) = t.nodes.get(nl as usize) else {
            continue;
        };
        debug_assert_eq!(node.dim, LEAF);
        let (from, to) = leaf_span(node.at);
        let (Some(ids), Some(rs)) = (t.leaf_rules.get(from..to), flat.get(from * dims..to * dims))
        else {
            continue;
        };
        // SAFETY: `pairs[i]` is 16 readable `u32`s (64 bytes); the load is unaligned.
        let k = unsafe { _mm512_loadu_si512(keys.pairs[i].as_ptr().cast()) };
        for (&r, rule) in ids.iter().zip(rs.chunks_exact(dims)) {
            let r = r as usize;
            if r >= best[i] {
                break;
            }
            // SAFETY: `rule` is `dims` pairs of `u32`, low then high (asserted at compile
            // time above): 2 * dims readable `u32`s, exactly the lanes of `m`; masked-off
            // lanes are not read.
            let l = unsafe { _mm512_maskz_loadu_epi32(m, rule.as_ptr().cast()) };
            let ge = _mm512_mask_cmpge_epu32_mask(m & 0x5555, k, l);
            let le = _mm512_mask_cmple_epu32_mask(m & 0xaaaa, k, l);
            if ge | le == m {
                best[i] = r;
                break;
            }
        }
    }
}

/// Walks the keys `which[0 .. 16 * V]` (indices into `keys`, masked to 0..64) from node 0
/// of `walk` (non-empty, fewer than 2^27 entries) to their leaves; `out[l]` becomes the
/// leaf of key `which[l]`.
#[target_feature(enable = "avx512f")]
#[inline]
fn walk<const V: usize>(
    walk: &[[u32; 2]],
    keys: &[u32; 16 * BATCH],
    which: &[u32; BATCH],
    out: &mut [u32; BATCH],
) {
    let Some(top) = walk.len().checked_sub(1) else {
        return;
    };
    if top >= 1 << 27 || V > BATCH / 16 {
        return;
    }
    let top = _mm512_set1_epi32(top as i32);
    let one = _mm512_set1_epi32(1);
    let low28 = _mm512_set1_epi32((1 << 28) - 1);
    let base = walk.as_ptr().cast::<i32>();
    let kbase = keys.as_ptr().cast::<i32>();
    let mask63 = _mm512_set1_epi32(63);
    let mut lane = [mask63; V];
    for (l, w) in lane.iter_mut().zip(which.chunks_exact(16)) {
        // SAFETY: `w` is 16 readable `u32`s (64 bytes); the load is unaligned.
        let w = unsafe { _mm512_loadu_si512(w.as_ptr().cast()) };
        *l = _mm512_and_si512(w, mask63);
    }
    let mut n: [__m512i; V] = [_mm512_set1_epi32(0); V];
    loop {
        let mut moved = 0u16;
        for v in 0..V {
            // Clamped to the last entry: `2n` and `2n + 1` are inside `walk` viewed as
            // `u32`s (2 per entry), and below 2^28, so they fit `i32`.
            let n2 = _mm512_slli_epi32::<1>(_mm512_min_epu32(n[v], top));
            // SAFETY: indices `2n`, `2n + 1` (scale 4 bytes) address the two `u32`s of
            // entry `n <= walk.len() - 1` of `walk`: in bounds, aligned to 4.
            let (at, rd) = unsafe {
                (
                    _mm512_i32gather_epi32::<4>(n2, base),
                    _mm512_i32gather_epi32::<4>(_mm512_add_epi32(n2, one), base),
                )
            };
            // The slot is the top 4 bits (0..=15) and lanes are masked to 0..=63, so
            // `slot * 64 + lane` < 16 * 64.
            let kidx =
                _mm512_add_epi32(_mm512_slli_epi32::<6>(_mm512_srli_epi32::<28>(rd)), lane[v]);
            // SAFETY: `kidx` lanes are in 0 .. 16 * 64 (above): inside `keys`.
            let x = unsafe { _mm512_i32gather_epi32::<4>(kidx, kbase) };
            let right = _mm512_and_si512(rd, low28);
            let next = _mm512_mask_blend_epi32(
                _mm512_cmpgt_epu32_mask(x, at),
                _mm512_add_epi32(n[v], one),
                right,
            );
            moved |= _mm512_cmpneq_epi32_mask(next, n[v]);
            n[v] = next;
        }
        if moved == 0 {
            break;
        }
    }
    for (v, chunk) in n.iter().zip(out.chunks_exact_mut(16)) {
        let mut o = [0u32; 16];
        // SAFETY: `o` is 64 writable bytes; the store is unaligned.
        unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), *v) };
        chunk.copy_from_slice(&o);
    }
}
