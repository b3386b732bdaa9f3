//! A tree's batch lookup in AVX-512 registers (x86-64 only; used when the CPU has AVX-512F
//! at run time, the classifier's bounds and the block's keys fit `u32`, and there are at
//! most 8 fields).
//!
//! **Walk.** Keys go sixteen to a register, and the (up to four) registers of a block are
//! stepped together so that their gathers overlap. Per step and register: two 8-lane
//! gathers of whole 8-byte nodes (cut; right child with the field slot packed above it),
//! split into cuts and children by two permutes; each key's value of that field picked
//! from registers holding the keys field by field (two-source permutes and blends, no
//! gather); an unsigned compare and a masked blend. Nodes are mirrored as `[u32; 2]`
//! ([`walk_entry`](crate::walk_entry)); keys as a table of 64-byte rows, one per key (its
//! fields as `u32`, then `u32::MAX`), each written by one masked load (and for `u64` keys
//! a narrowing) and a store; the table is kept per thread across calls.
//!
//! **Leaves.** The walk hands back each key's last walk entry, which says whether its leaf
//! has no rule, one (and where), two (and where) or more. One rule is checked without a
//! branch on the outcome: its `(low, high)` pairs loaded as up to 16 `u32` lanes (a masked
//! load) and compared with the key's row permuted to `[k0, k0, k1, k1, ...]`:
//! greater-or-equal on the even lanes, less-or-equal on the odd ones, the answer kept with
//! a select. Leaves of two rules (two that overlap in the leaf's box) are checked the same
//! way, both rules, the first that matches kept with selects. Leaves of more rules (trees
//! cut short) take the portable scan.
//!
//! **Keys per tree.** A tree is walked only by the keys whose best rule so far (kept as
//! `u32`) is above the tree's first: a compare and a compress per 16 keys.

#![allow(unsafe_code)]

use crate::{leaf_span, Flat, KeyValue, Tree, BATCH, LEAF_NONE, LEAF_ONE, LEAF_TWO};
use std::arch::x86_64::*;

// A leaf's ranges are read as `u32`s in the order low, high.
const _: () =
    assert!(std::mem::offset_of!((u32, u32), 0) == 0 && std::mem::offset_of!((u32, u32), 1) == 4);

/// An array on 64-byte boundaries: each 64-byte store to it sits in one cache line, so a
/// load of part of it soon after is forwarded from the store (one straddling two lines
/// waits for it to reach the cache).
#[repr(C, align(64))]
struct Lines<T>(T);

/// Whether this CPU can run [`tree`].
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// The keys of a block as [`tree`] reads them (one buffer for all the blocks of a
/// batch: each block overwrites the rows of its keys). Rows sit on cache lines.
#[repr(C, align(64))]
pub(crate) struct Keys {
    /// `table[i * 16 + s]`: field `s` of key `i` as `u32` (`s` < 8), `u32::MAX` in slots
    /// 8 to 15 (those that leaves and jumps select, see [`walk_entry`](crate::walk_entry)).
    table: [u32; 16 * BATCH],
}

impl Default for Keys {
    fn default() -> Keys {
        Keys {
            table: [u32::MAX; 16 * BATCH],
        }
    }
}

impl Keys {
    /// Takes the first `dims` (1 to 8) values of each of `keys` (at most [`BATCH`], each
    /// with at least `dims` values); false (the buffer then unusable until the next fill)
    /// when one does not fit `u32`, or when those conditions or AVX-512F are missing.
    pub(crate) fn fill<K: AsRef<[V]>, V: KeyValue>(&mut self, keys: &[K], dims: usize) -> bool {
        if !available()
            || !(1..=8).contains(&dims)
            || keys.len() > BATCH
            || keys.iter().any(|k| k.as_ref().len() < dims)
        {
            return false;
        }
        // SAFETY: AVX-512F is present (checked above); every key has at least `dims`
        // (1 to 8) values and there are at most `BATCH` keys (checked above).
        unsafe { fill_avx512(&mut self.table, keys, dims) }
    }

    /// Key `i`'s values (as filled).
    pub(crate) fn key(&self, i: usize) -> Vec<u64> {
        self.table
            .get(i * 16..i * 16 + 8)
            .map_or(Vec::new(), |r| r.iter().map(|&v| u64::from(v)).collect())
    }
}

/// [`Keys::fill`] once its conditions hold: per key, one masked load, (for `u64` values) a
/// compare and a narrowing, and one 64-byte store.
#[target_feature(enable = "avx512f")]
fn fill_avx512<K: AsRef<[V]>, V: KeyValue>(
    table: &mut [u32; 16 * BATCH],
    keys: &[K],
    dims: usize,
) -> bool {
    let m = ((1u32 << dims.min(8)) - 1) as u8;
    let max = _mm512_set1_epi64(i64::from(u32::MAX));
    let ones = _mm512_set1_epi32(-1);
    let mut over = 0u8;
    for (k, row) in keys.iter().zip(table.chunks_exact_mut(16)) {
        let k = k.as_ref();
        if k.len() < dims {
            return false;
        }
        let r = if V::BYTES == 8 {
            // SAFETY: `k` has at least `dims` values of 8 bytes (checked above), exactly
            // the lanes of `m`; masked-off lanes are not read.
            let v = unsafe { _mm512_maskz_loadu_epi64(m, k.as_ptr().cast()) };
            over |= _mm512_mask_cmpgt_epu64_mask(m, v, max);
            _mm512_inserti64x4::<0>(ones, _mm512_cvtepi64_epi32(v))
        } else {
            // SAFETY: `k` has at least `dims` values of 4 bytes (`V` is `u32`, the only
            // other `KeyValue`), exactly the lanes of `m`; masked-off lanes are not read.
            unsafe { _mm512_mask_loadu_epi32(ones, u16::from(m), k.as_ptr().cast()) }
        };
        // SAFETY: `row` is 16 writable `u32`s (64 bytes); the store is unaligned.
        unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), r) };
    }
    over == 0
}

/// Looks up the first `n` keys (at most 64) of `keys` in tree `t` (`dims` fields, 1 to
/// 8; leaf ranges `u32`; `t.walk` in step with `t.nodes`), those whose `best` is above the
/// tree's best rule, and lowers `best[i]` to the first rule key `i` matches there, if that
/// is lower. Returns false, having done nothing, when the tree or `dims` do not fit (no
/// walk form, 2^27 nodes or more, more than 8 fields) or the CPU has no AVX-512F.
///
/// `all` walks all `n` keys without reading `best` (for a block's first tree, where every
/// `best` is `u32::MAX`: reading back as one 64-byte load what was just written in smaller
/// stores stalls until those reach the cache, 7 % of the time on acl5). Walking a key
/// whose `best` cannot be beaten changes nothing but the time.
pub(crate) fn tree(
    t: &Tree,
    dims: usize,
    keys: &Keys,
    n: usize,
    best: &mut [u32; BATCH],
    all: bool,
) -> bool {
    if t.walk.is_empty()
        || t.walk.len() >= 1 << 27
        || !(1..=8).contains(&dims)
        || !matches!(t.leaf_flat, Flat::Narrow(_))
        || n > BATCH
        || !available()
    {
        return false;
    }
    // SAFETY: AVX-512F is present (checked above); the other preconditions of
    // `tree_avx512` (a non-empty walk of fewer than 2^27 entries, 1 to 8 fields, at most
    // 64 keys) were checked above.
    unsafe { tree_avx512(t, dims, keys, n, best, all) };
    true
}

#[target_feature(enable = "avx512f")]
fn tree_avx512(t: &Tree, dims: usize, keys: &Keys, n: usize, best: &mut [u32; BATCH], all: bool) {
    // The keys for which this tree's best rule could still win, packed in order (16 more
    // entries of room for whole-register stores).
    let mut which = Lines([0u32; BATCH + 16]);
    let which_all = &mut which.0;
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let m = if all {
        let m = n.min(BATCH);
        if m == 0 {
            return;
        }
        // Keys 0..m, then the last one again: whole aligned registers, so that the walk's
        // loads of them are forwarded from these stores.
        let last = _mm512_set1_epi32(m as i32 - 1);
        for (c, w) in which_all.chunks_exact_mut(16).enumerate() {
            let ids = _mm512_min_epu32(
                _mm512_add_epi32(iota, _mm512_set1_epi32(16 * c as i32)),
                last,
            );
            // SAFETY: `w` is 16 writable `u32`s (64 bytes); the store is unaligned.
            unsafe { _mm512_storeu_si512(w.as_mut_ptr().cast(), ids) };
        }
        m
    } else {
        let mut m = 0usize;
        let mut last = 0u32;
        let first = _mm512_set1_epi32(t.first as i32);
        for (c, b) in best.chunks_exact(16).enumerate() {
            let valid = if n >= 16 * (c + 1) {
                u16::MAX
            } else {
                ((1u32 << n.saturating_sub(16 * c)) - 1) as u16
            };
            // SAFETY: `b` is 16 readable `u32`s (64 bytes); the load is unaligned.
            let b = unsafe { _mm512_loadu_si512(b.as_ptr().cast()) };
            let k = _mm512_mask_cmpgt_epu32_mask(valid, b, first);
            let ids = _mm512_maskz_compress_epi32(
                k,
                _mm512_add_epi32(iota, _mm512_set1_epi32(16 * c as i32)),
            );
            // SAFETY: `m` <= 16 * c <= 48, and `which` holds 80: 16 writable `u32`s at
            // `m`; the store is unaligned.
            unsafe { _mm512_storeu_si512(which_all.as_mut_ptr().add(m.min(BATCH)).cast(), ids) };
            m += k.count_ones() as usize;
            if k != 0 {
                // (Not read back from `which`: a load of part of a store that straddles
                // two cache lines waits for it to reach the cache.)
                last = 16 * c as u32 + 15 - k.leading_zeros();
            }
        }
        let m = m.min(BATCH);
        if m == 0 {
            return;
        }
        // Lanes past the keys repeat the last one.
        for w in &mut which_all[m..] {
            *w = last;
        }
        m
    };
    let which: &[u32; BATCH] = which_all[..BATCH].try_into().unwrap_or(&[0; BATCH]);
    let idx = &which[..m];
    // Each key's leaf, as its walk entry: `[cut, right | slot << 28]`.
    let mut at = Lines([0u32; BATCH]);
    let mut rd = Lines([0u32; BATCH]);
    let (at, rd) = (&mut at.0, &mut rd.0);
    // Keys in registers: the number of fields rounded up to 2, 4, 5 or 8 (extra
    // registers hold slots no inner node selects).
    macro_rules! walk_d {
        ($d:literal) => {
            match idx.len().div_ceil(16) {
                1 => walk::<1, $d>(&t.walk, &keys.table, which, at, rd),
                2 => walk::<2, $d>(&t.walk, &keys.table, which, at, rd),
                3 => walk::<3, $d>(&t.walk, &keys.table, which, at, rd),
                _ => walk::<4, $d>(&t.walk, &keys.table, which, at, rd),
            }
        };
    }
    match dims {
        1..=2 => walk_d!(2),
        3..=4 => walk_d!(4),
        5 => walk_d!(5),
        _ => walk_d!(8),
    }
    let Flat::Narrow(flat) = &t.leaf_flat else {
        return;
    };
    // The lanes of one rule: 2 * dims <= 16.
    let m = ((1u32 << (2 * dims)) - 1) as u16;
    // Lane `2f` and `2f + 1` of a key's pair register: its field `f`.
    let twice = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    let rules = &t.leaf_rules;
    for ((&a, &r), &i) in at.iter().zip(rd.iter()).zip(idx) {
        let i = i as usize % BATCH;
        let bi = best[i] as usize;
        match r >> 28 {
            LEAF_ONE => {}
            LEAF_NONE => continue,
            LEAF_TWO => {
                // Two rules, `leaf_rules[a]` and `[a + 1]` (built where the two overlap
                // in the leaf's box): both checked, without a branch on the outcome.
                let a = a as usize;
                let ok = a + 1 < rules.len() && (a + 2) * dims <= flat.len();
                let lm = if ok { m } else { 0 };
                let (r1, r2) = match (rules.get(a), rules.get(a + 1)) {
                    (Some(&r1), Some(&r2)) if ok => (r1, r2),
                    _ => (u32::MAX, u32::MAX),
                };
                // SAFETY: row `i` (< 64) of the table is 16 readable `u32`s (64 bytes);
                // the load is unaligned.
                let k = unsafe { _mm512_loadu_si512(keys.table.as_ptr().add(i * 16).cast()) };
                let k = _mm512_permutexvar_epi32(twice, k);
                let p = flat.as_ptr().wrapping_add(if ok { a * dims } else { 0 });
                let p2 = p.wrapping_add(if ok { dims } else { 0 });
                // SAFETY: where `ok`, `p` and `p2` are the leaf's two rules: `dims` pairs
                // of `u32` each, low then high (asserted at compile time above), inside
                // `flat`: 2 * dims readable `u32`s each, exactly the lanes of `lm`;
                // otherwise `lm` is 0 and nothing is read.
                let (l, l2) = unsafe {
                    (
                        _mm512_maskz_loadu_epi32(lm, p.cast()),
                        _mm512_maskz_loadu_epi32(lm, p2.cast()),
                    )
                };
                let ge = _mm512_mask_cmpge_epu32_mask(m & 0x5555, k, l);
                let le = _mm512_mask_cmple_epu32_mask(m & 0xaaaa, k, l);
                let ge2 = _mm512_mask_cmpge_epu32_mask(m & 0x5555, k, l2);
                let le2 = _mm512_mask_cmple_epu32_mask(m & 0xaaaa, k, l2);
                let x = std::hint::select_unpredictable(ge2 | le2 == m, r2, u32::MAX);
                let x = std::hint::select_unpredictable(ge | le == m, r1, x);
                best[i] = best[i].min(x);
                continue;
            }
            _ => {
                // A leaf of several rules (a tree cut short): the portable scan.
                if let Some(node) = t.nodes.get((r & ((1 << 28) - 1)) as usize) {
                    let (from, to) = leaf_span(node.at);
                    if let (Some(ids), Some(rs)) =
                        (rules.get(from..to), flat.get(from * dims..to * dims))
                    {
                        let k = keys.key(i);
                        if let Some(x) = crate::first_match(rs, dims, ids, &k, bi) {
                            best[i] = x as u32;
                        }
                    }
                }
                continue;
            }
        }
        // A leaf of one rule, `leaf_rules[a]`: checked without a branch on the outcome.
        let a = a as usize;
        let ok = a < rules.len() && (a + 1) * dims <= flat.len();
        let lm = if ok { m } else { 0 };
        let rule = rules.get(a).map_or(u32::MAX, |&x| x);
        // SAFETY: row `i` (< 64) of the table is 16 readable `u32`s (64 bytes); the load
        // is unaligned.
        let k = unsafe { _mm512_loadu_si512(keys.table.as_ptr().add(i * 16).cast()) };
        let k = _mm512_permutexvar_epi32(twice, k);
        let p = flat.as_ptr().wrapping_add(if ok { a * dims } else { 0 });
        // SAFETY: where `ok`, `p` is the leaf's rule: `dims` pairs of `u32`, low then
        // high (asserted at compile time above), inside `flat`: 2 * dims readable `u32`s,
        // exactly the lanes of `lm`; otherwise `lm` is 0 and nothing is read.
        let l = unsafe { _mm512_maskz_loadu_epi32(lm, p.cast()) };
        let ge = _mm512_mask_cmpge_epu32_mask(m & 0x5555, k, l);
        let le = _mm512_mask_cmple_epu32_mask(m & 0xaaaa, k, l);
        let hit = ok & (ge | le == m) & (rule < best[i]);
        best[i] = std::hint::select_unpredictable(hit, rule, best[i]);
    }
}

/// Walks the keys `which[0 .. 16 * V]` (indices into `keys`, masked to 0..64) from node 0
/// of `walk` (non-empty, fewer than 2^27 entries; inner nodes select slots below `D`, at
/// most 8) to their leaves; `at[l]` and `rd[l]` become the two halves of the walk entry of
/// key `which[l]`'s leaf.
///
/// Each register's keys are held as `D` registers, one per field, and a step picks each
/// lane's field with two-source permutes (slot bit 0) and blends (bits 1 and 2) instead of
/// a gather; leaves and jumps (slots 8 to 15) always go right.
#[target_feature(enable = "avx512f")]
#[inline]
fn walk<const V: usize, const D: usize>(
    walk: &[[u32; 2]],
    keys: &[u32; 16 * BATCH],
    which: &[u32; BATCH],
    at_out: &mut [u32; BATCH],
    rd_out: &mut [u32; BATCH],
) {
    let Some(top) = walk.len().checked_sub(1) else {
        return;
    };
    if top >= 1 << 27 || V > BATCH / 16 || !(1..=8).contains(&D) {
        return;
    }
    let top = _mm512_set1_epi32(top as i32);
    let one = _mm512_set1_epi32(1);
    let low28 = _mm512_set1_epi32((1 << 28) - 1);
    let base = walk.as_ptr().cast::<i64>();
    let kbase = keys.as_ptr().cast::<i32>();
    let mask63 = _mm512_set1_epi32(63);
    let sixteen = _mm512_set1_epi32(16);
    let bit1 = _mm512_set1_epi32(1 << 29);
    let bit2 = _mm512_set1_epi32(1 << 30);
    let bit3 = _mm512_set1_epi32(1 << 31);
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Lanes 0..8 of the first gather and 0..8 of the second: their low (cut) and high
    // (right and slot) halves.
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // Field `f` of each lane's key.
    let mut kr = [[one; D]; V];
    for (k, w) in kr.iter_mut().zip(which.chunks_exact(16)) {
        // SAFETY: `w` is 16 readable `u32`s (64 bytes); the load is unaligned.
        let w = unsafe { _mm512_loadu_si512(w.as_ptr().cast()) };
        let row = _mm512_slli_epi32::<4>(_mm512_and_si512(w, mask63));
        for (f, x) in k.iter_mut().enumerate() {
            // SAFETY: rows are multiples of 16 below 64 * 16 and `f` < 8 (checked
            // above), so `row + f` < 16 * 64: inside `keys`.
            *x = unsafe {
                _mm512_i32gather_epi32::<4>(
                    _mm512_add_epi32(row, _mm512_set1_epi32(f as i32)),
                    kbase,
                )
            };
        }
    }
    let mut n: [__m512i; V] = [_mm512_set1_epi32(0); V];
    let mut at: [__m512i; V] = [_mm512_set1_epi32(0); V];
    let mut rd: [__m512i; V] = [_mm512_set1_epi32(0); V];
    loop {
        let mut moved = 0u16;
        for v in 0..V {
            // Clamped to the last entry, so inside `walk`.
            let nc = _mm512_min_epu32(n[v], top);
            // SAFETY: indices `n <= walk.len() - 1` (scale 8 bytes) address entry `n` of
            // `walk` (8 bytes each; gathers need no alignment): in bounds.
            let (g0, g1) = unsafe {
                (
                    _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(nc), base),
                    _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(nc), base),
                )
            };
            at[v] = _mm512_permutex2var_epi32(g0, even, g1);
            rd[v] = _mm512_permutex2var_epi32(g0, odd, g1);
            // Each lane's own position, plus 16 where the slot is odd.
            let sel = _mm512_or_si512(
                iota,
                _mm512_and_si512(_mm512_srli_epi32::<24>(rd[v]), sixteen),
            );
            let k = &kr[v];
            let pair = |j: usize| {
                if 2 * j + 1 < D {
                    _mm512_permutex2var_epi32(k[2 * j], sel, k[2 * j + 1])
                } else {
                    // One field left: each lane's own value.
                    k[(2 * j).min(D - 1)]
                }
            };
            let b1 = _mm512_test_epi32_mask(rd[v], bit1);
            let x = if D <= 2 {
                pair(0)
            } else if D <= 4 {
                _mm512_mask_blend_epi32(b1, pair(0), pair(1))
            } else {
                let lo = _mm512_mask_blend_epi32(b1, pair(0), pair(1));
                let hi = if D <= 6 {
                    pair(2)
                } else {
                    _mm512_mask_blend_epi32(b1, pair(2), pair(3))
                };
                _mm512_mask_blend_epi32(_mm512_test_epi32_mask(rd[v], bit2), lo, hi)
            };
            let right = _mm512_and_si512(rd[v], low28);
            let go = _mm512_cmpgt_epu32_mask(x, at[v]) | _mm512_test_epi32_mask(rd[v], bit3);
            let next = _mm512_mask_blend_epi32(go, _mm512_add_epi32(nc, one), right);
            moved |= _mm512_cmpneq_epi32_mask(next, n[v]);
            n[v] = next;
        }
        if moved == 0 {
            break;
        }
    }
    // After a round where no lane moved, `at` and `rd` are the entries of the leaves.
    for (v, (a, r)) in at_out
        .chunks_exact_mut(16)
        .zip(rd_out.chunks_exact_mut(16))
        .enumerate()
        .take(V)
    {
        // SAFETY: `a` and `r` are 16 writable `u32`s (64 bytes); the stores are unaligned.
        unsafe {
            _mm512_storeu_si512(a.as_mut_ptr().cast(), at[v]);
            _mm512_storeu_si512(r.as_mut_ptr().cast(), rd[v]);
        }
    }
}
