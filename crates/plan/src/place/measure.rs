//! What placement measures: the cost of handing packets from one core to another
//! ([`handoff_ns`]), and the chain's profile (ns per packet per element, packets per edge)
//! turned into the element graph ([`Profile`], [`profile`]).

use std::sync::mpsc;
use std::time::Instant;

/// Packets per batch in the handoff measurement (the executor's default batch).
const BATCH: usize = 32;
/// Bytes per packet buffer handed over (a small frame's cache lines).
const FRAME: usize = 128;

/// Measures the cost of passing packets between two threads pinned to two cores (the first
/// two cores `core_affinity` lists; unpinned when there are fewer): batches of [`BATCH`]
/// buffers of [`FRAME`] bytes go one way through a bounded channel, the receiver writes
/// each frame's first bytes (as a stage reading and rewriting headers does) and sends the
/// batch back for reuse, as a pipeline recycles its buffers. The same work done in one
/// thread is subtracted. Returns ns per packet (the best of `rounds` rounds of `packets`
/// packets), at least 0.
pub fn handoff_ns(packets: usize, rounds: usize) -> f64 {
    let batches = packets.div_ceil(BATCH).max(1);
    let n = (batches * BATCH) as f64;
    let mut best = f64::INFINITY;
    for _ in 0..rounds.max(1) {
        let local = local_pass(batches);
        let crossed = crossed_pass(batches);
        best = best.min((crossed - local).max(0.0) / n);
    }
    if best.is_finite() {
        best
    } else {
        0.0
    }
}

/// Writes the first bytes of every frame of `batch` (the receiver's touch).
#[inline]
fn touch(batch: &mut [Vec<u8>]) -> u64 {
    let mut sum = 0u64;
    for f in batch.iter_mut() {
        if let Some(b) = f.get_mut(..16) {
            for x in b.iter_mut() {
                *x = x.wrapping_add(1);
                sum = sum.wrapping_add(u64::from(*x));
            }
        }
    }
    sum
}

fn fresh_batch() -> Vec<Vec<u8>> {
    (0..BATCH).map(|_| vec![0u8; FRAME]).collect()
}

/// ns for `batches` batches touched in one thread.
fn local_pass(batches: usize) -> f64 {
    let mut b = fresh_batch();
    let t = Instant::now();
    let mut sum = 0u64;
    for _ in 0..batches {
        sum = sum.wrapping_add(touch(std::hint::black_box(&mut b)));
    }
    std::hint::black_box(sum);
    t.elapsed().as_nanos() as f64
}

/// ns for `batches` batches passed to a thread on another core and back.
fn crossed_pass(batches: usize) -> f64 {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (to_rx, rx) = mpsc::sync_channel::<Vec<Vec<u8>>>(8);
    let (back_tx, back) = mpsc::sync_channel::<Vec<Vec<u8>>>(8);
    let second = cores.get(1).copied();
    let receiver = std::thread::spawn(move || {
        if let Some(c) = second {
            let _ = core_affinity::set_for_current(c);
        }
        let mut sum = 0u64;
        while let Ok(mut b) = rx.recv() {
            sum = sum.wrapping_add(touch(&mut b));
            if back_tx.send(b).is_err() {
                break;
            }
        }
        sum
    });
    // The sender runs on a thread of its own, pinned to the first core (the caller stays
    // unpinned).
    let first = cores.first().copied().filter(|_| second.is_some());
    let sender = std::thread::spawn(move || {
        if let Some(c) = first {
            let _ = core_affinity::set_for_current(c);
        }
        let mut spare: Vec<Vec<Vec<u8>>> = (0..4).map(|_| fresh_batch()).collect();
        let t = Instant::now();
        let mut sent = 0;
        let mut returned = 0;
        while returned < batches {
            let b = if sent < batches { spare.pop() } else { None };
            match b {
                Some(b) => {
                    if to_rx.send(b).is_err() {
                        break;
                    }
                    sent += 1;
                }
                None => match back.recv() {
                    Ok(b) => {
                        returned += 1;
                        spare.push(b);
                    }
                    Err(_) => break,
                },
            }
        }
        let ns = t.elapsed().as_nanos() as f64;
        drop(to_rx);
        ns
    });
    let ns = sender.join().unwrap_or(f64::INFINITY);
    let _ = receiver.join();
    ns
}
