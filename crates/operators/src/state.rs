//! State with NetBricks' three consistency levels, each a type, so the level an NF chose is
//! visible in its signature.
//!
//! State is partitioned across workers, as NetBricks partitions it across cores: partition
//! `p` of a per-flow or per-key table belongs to worker `p` (see [`partition`]), and the level
//! says who else may touch it.
//!
//! | level | type | writers | readers |
//! |---|---|---|---|
//! | no external access | [`Local<T>`] | its worker, `&mut` | its worker only |
//! | bounded inconsistency | [`Writer<T>`] / [`Reader<T>`] | one per partition | any worker, at most `K − 1` updates behind |
//! | strict (serializable) | [`Strict<T>`] | any worker, under a lock | any worker, under a lock |
//!
//! * [`Local<T>`] is owned by one pipeline and moves with it; it is `Send` but neither
//!   `Clone` nor `Sync`, so no other thread can get at it (checked by the compiler):
//!   ```compile_fail
//!   let flows = operators::state::Local::new(0u64);
//!   let shared = std::sync::Arc::new(flows);
//!   std::thread::spawn(move || *shared.get()); // `Local` is not `Sync`
//!   ```
//! * [`bounded(k, init)`](bounded) gives the partition's one [`Writer`] (not `Clone`) and a
//!   [`Reader`] (`Clone`, one per worker). The writer updates its own copy; every `k`th update
//!   it publishes a snapshot (an `Arc` swapped in under a short lock), so a reader reading
//!   after the writer's `u`th update sees the state after update `u − (u mod k)` or later:
//!   never more than `k − 1` updates behind, always a whole snapshot (never a torn one).
//!   A reader checks one atomic version per read and takes the lock only when it changed.
//!   [`Writer::publish`] publishes at once (a control plane that wants its update seen now).
//!   ```compile_fail
//!   let (w, _r) = operators::state::bounded(4, 0u64);
//!   let w2 = w.clone(); // one writer per partition: `Writer` is not `Clone`
//!   ```
//! * [`Strict<T>`] is shared (`Clone`) behind a read-write lock: every access is one critical
//!   section, so concurrent readers and writers are serializable. It costs a lock per access
//!   and the cache line moves between cores: the level to use when nothing else fits.
//!
//! A poisoned lock (a UDF panicked while holding it) is taken over as it is rather than
//! panicking again.

use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The partition (worker) of `n` that owns `key`: a fixed hash of the key modulo `n`, the
/// same in every run and on every worker (`n` of 0 counts as 1).
pub fn partition<K: Hash + ?Sized>(key: &K, n: usize) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % n.max(1) as u64) as usize
}

/// State with no external access: owned by one worker's pipeline, read and written through
/// plain references, never seen by another thread.
#[derive(Debug, Default)]
pub struct Local<T> {
    value: T,
    _not_sync: PhantomData<Cell<()>>,
}

impl<T> Local<T> {
    /// State holding `value`.
    pub fn new(value: T) -> Local<T> {
        Local {
            value,
            _not_sync: PhantomData,
        }
    }

    /// One partition per worker, partition `w` built by `init(w)`.
    pub fn per_worker(n: usize, mut init: impl FnMut(usize) -> T) -> Vec<Local<T>> {
        (0..n.max(1)).map(|w| Local::new(init(w))).collect()
    }

    /// The state.
    #[inline]
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The state, writable.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The value, ending the state's life.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> std::ops::Deref for Local<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::DerefMut for Local<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

/// What a bounded partition's writer and readers share: the last snapshot and its number.
#[derive(Debug)]
struct Published<T> {
    snapshot: RwLock<Arc<Snapshot<T>>>,
    version: AtomicU64,
}

/// A published state: the value after `updates` updates.
#[derive(Debug)]
pub struct Snapshot<T> {
    version: u64,
    /// How many updates the writer had made when it published this.
    pub updates: u64,
    /// The state after them.
    pub value: T,
}

impl<T> std::ops::Deref for Snapshot<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

/// A bounded-inconsistency partition: its one writer, and a reader to clone for every worker
/// that reads it. The writer publishes a snapshot every `k` updates (`k` of 0 counts as 1),
/// so readers are never more than `k − 1` updates behind.
pub fn bounded<T: Clone>(k: u64, init: T) -> (Writer<T>, Reader<T>) {
    let first = Arc::new(Snapshot {
        version: 0,
        updates: 0,
        value: init.clone(),
    });
    let shared = Arc::new(Published {
        snapshot: RwLock::new(Arc::clone(&first)),
        version: AtomicU64::new(0),
    });
    let w = Writer {
        value: init,
        updates: 0,
        published: 0,
        k: k.max(1),
        shared: Arc::clone(&shared),
    };
    let r = Reader {
        cached: first,
        shared,
    };
    (w, r)
}

/// `n` bounded-inconsistency partitions (one per worker, partition `w` starting as
/// `init(w)`): the writers, to hand one to each worker, and the readers of all of them.
pub fn bounded_partitions<T: Clone>(
    n: usize,
    k: u64,
    mut init: impl FnMut(usize) -> T,
) -> (Vec<Writer<T>>, Vec<Reader<T>>) {
    (0..n.max(1)).map(|w| bounded(k, init(w))).unzip()
}

/// The one writer of a bounded-inconsistency partition (not `Clone`).
#[derive(Debug)]
pub struct Writer<T> {
    value: T,
    updates: u64,
    published: u64,
    k: u64,
    shared: Arc<Published<T>>,
}

impl<T: Clone> Writer<T> {
    /// The writer's own copy (always current).
    #[inline]
    pub fn get(&self) -> &T {
        &self.value
    }

    /// How many updates the writer has made.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The bound: a snapshot is published every `k` updates.
    pub fn bound(&self) -> u64 {
        self.k
    }

    /// Makes one update with `f`; publishes a snapshot when this is the `k`th update since
    /// the last one published. Returns what `f` returned.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let r = f(&mut self.value);
        self.updates += 1;
        if self.updates - self.published >= self.k {
            self.publish();
        }
        r
    }

    /// Publishes the current state now (readers see every update made so far).
    pub fn publish(&mut self) {
        if self.published == self.updates {
            return;
        }
        let version = self.shared.version.load(Ordering::Relaxed) + 1;
        let snap = Arc::new(Snapshot {
            version,
            updates: self.updates,
            value: self.value.clone(),
        });
        *write(&self.shared.snapshot) = snap;
        self.published = self.updates;
        // A reader that sees the new version finds this snapshot (or a later one) under the
        // lock.
        self.shared.version.store(version, Ordering::Release);
    }

    /// A new reader of this partition.
    pub fn reader(&self) -> Reader<T> {
        Reader {
            cached: Arc::clone(&read(&self.shared.snapshot)),
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A reader of a bounded-inconsistency partition (one per worker; `Clone`). It sees the
/// writer's last published snapshot.
#[derive(Debug)]
pub struct Reader<T> {
    cached: Arc<Snapshot<T>>,
    shared: Arc<Published<T>>,
}

impl<T> Clone for Reader<T> {
    fn clone(&self) -> Reader<T> {
        Reader {
            cached: Arc::clone(&self.cached),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> Reader<T> {
    /// The last published snapshot: one atomic load when nothing changed since the last
    /// read, a short read lock when something did.
    #[inline]
    pub fn get(&mut self) -> &Snapshot<T> {
        self.refresh();
        &self.cached
    }

    /// Takes the last published snapshot if there is a newer one than the one held; returns
    /// whether there was.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        let v = self.shared.version.load(Ordering::Acquire);
        if v == self.cached.version {
            return false;
        }
        self.cached = Arc::clone(&read(&self.shared.snapshot));
        true
    }

    /// The snapshot held, without looking for a newer one.
    #[inline]
    pub fn held(&self) -> &Snapshot<T> {
        &self.cached
    }

    /// The snapshot held, as an `Arc` a reader may keep.
    pub fn snapshot(&mut self) -> Arc<Snapshot<T>> {
        self.refresh();
        Arc::clone(&self.cached)
    }
}

/// Strictly consistent state: any worker reads and writes it, each access one critical
/// section under a read-write lock (serializable). `Clone` shares it.
#[derive(Debug, Default)]
pub struct Strict<T> {
    inner: Arc<RwLock<T>>,
}

impl<T> Clone for Strict<T> {
    fn clone(&self) -> Strict<T> {
        Strict {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> Strict<T> {
    /// Shared state holding `value`.
    pub fn new(value: T) -> Strict<T> {
        Strict {
            inner: Arc::new(RwLock::new(value)),
        }
    }

    /// Reads the state (other readers may read at the same time; no writer does).
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&read(&self.inner))
    }

    /// Reads and writes the state alone: a transaction, serializable with every other.
    pub fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut write(&self.inner))
    }
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn local_state_moves_with_its_worker() {
        let mut parts = Local::per_worker(3, |w| vec![w; 2]);
        parts[1].get_mut().push(9);
        let mut moved = parts.pop().unwrap();
        let back = std::thread::spawn(move || {
            moved[0] += 10;
            moved
        })
        .join()
        .unwrap();
        assert_eq!(*back.get(), [12, 2]);
        assert_eq!(parts[1].get(), &[1, 1, 9]);
        assert_eq!(parts.swap_remove(0).into_inner(), [0, 0]);
    }

    #[test]
    fn partition_is_fixed_and_in_range() {
        for n in 1..6 {
            for k in 0..100u32 {
                assert!(partition(&k, n) < n);
                assert_eq!(partition(&k, n), partition(&k, n));
            }
        }
        assert_eq!(partition("x", 0), 0);
        let spread: std::collections::BTreeSet<_> = (0..100u32).map(|k| partition(&k, 4)).collect();
        assert_eq!(spread.len(), 4);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u64),
        Read,
        Publish,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..1000).prop_map(Op::Add),
            3 => Just(Op::Read),
            1 => Just(Op::Publish),
        ]
    }

    proptest! {
        /// A reader sees exactly the writer's state as of its last publication: every `k`th
        /// update or an explicit publish; so never more than `k - 1` updates behind.
        #[test]
        fn bounded_reader_sees_the_last_publication(k in 0u64..9, ops in prop::collection::vec(op(), 0..200)) {
            let (mut w, mut r) = bounded(k, Vec::<u64>::new());
            let mut r2 = r.clone();
            let (mut history, mut published) = (vec![Vec::new()], 0usize);
            for op in ops {
                match op {
                    Op::Add(x) => {
                        w.update(|v| v.push(x));
                        let mut next = history.last().unwrap().clone();
                        next.push(x);
                        history.push(next);
                        if (history.len() - 1 - published) as u64 >= k.max(1) {
                            published = history.len() - 1;
                        }
                    }
                    Op::Publish => {
                        w.publish();
                        published = history.len() - 1;
                    }
                    Op::Read => {
                        let s = r.get();
                        prop_assert_eq!(s.updates as usize, published);
                        prop_assert_eq!(&s.value, &history[published]);
                        prop_assert!(w.updates() - s.updates < k.max(1));
                    }
                }
                prop_assert_eq!(w.get(), history.last().unwrap());
            }
            prop_assert_eq!(r2.get().updates as usize, published);
            prop_assert_eq!(w.reader().get().updates as usize, published);
        }

        /// Strict state is serializable: concurrent read-modify-writes lose nothing.
        #[test]
        fn strict_increments_are_not_lost(per_thread in prop::collection::vec(0u64..300, 1..4)) {
            let s = Strict::new(0u64);
            let handles: Vec<_> = per_thread
                .iter()
                .map(|&n| {
                    let s = s.clone();
                    std::thread::spawn(move || (0..n).for_each(|_| s.write(|v| *v += 1)))
                })
                .collect();
            handles.into_iter().for_each(|h| h.join().unwrap());
            prop_assert_eq!(s.read(|v| *v), per_thread.iter().sum::<u64>());
        }
    }

    /// Readers on other threads never lag more than `k - 1` updates behind the writer and
    /// never see a torn snapshot or go back in time.
    #[test]
    fn bounded_readers_on_other_threads_lag_less_than_k() {
        const K: u64 = 7;
        const UPDATES: u64 = 50_000;
        let (mut w, r) = bounded(K, [0u64; 8]);
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (mut r, done, stop) = (r.clone(), Arc::clone(&done), Arc::clone(&stop));
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    let (mut last, mut reads, mut max_lag) = (0, 0u64, 0);
                    started.fetch_add(1, Ordering::AcqRel);
                    loop {
                        let finished = stop.load(Ordering::Acquire);
                        let before = done.load(Ordering::Acquire);
                        let s = r.get();
                        let after = done.load(Ordering::Acquire);
                        assert!(
                            s.value.iter().all(|&x| x == s.updates),
                            "torn: {:?}",
                            s.value
                        );
                        assert!(
                            s.updates + K > before,
                            "lag: saw {} after {}",
                            s.updates,
                            before
                        );
                        // A snapshot is published before `done` counts its update.
                        assert!(s.updates <= after + 1 && s.updates >= last);
                        max_lag = max_lag.max(before - s.updates.min(before));
                        last = s.updates;
                        reads += 1;
                        if finished {
                            break;
                        }
                    }
                    (reads, max_lag, last)
                })
            })
            .collect();
        while started.load(Ordering::Acquire) < 2 {
            std::thread::yield_now();
        }
        for i in 0..UPDATES {
            w.update(|v| v.iter_mut().for_each(|x| *x += 1));
            done.fetch_add(1, Ordering::Release);
            if i % 1000 == 0 {
                // Two cores shared by many: let the readers run during the updates.
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Release);
        for h in readers {
            let (reads, max_lag, last) = h.join().unwrap();
            assert!(reads > 0);
            assert!(max_lag < K);
            assert!(last + K > UPDATES);
        }
        let mut r = r;
        assert_eq!(r.get().updates, UPDATES - UPDATES % K);
        w.publish();
        assert_eq!(r.get().value, [UPDATES; 8]);
    }

    /// Per-key state partitioned over two workers: each worker writes the keys it owns
    /// (`partition`) into its own partition and reads the other's, at most `k - 1` updates
    /// behind; at the end every key was counted once, by its owner.
    #[test]
    fn per_key_partitions_have_one_writer_each() {
        use std::collections::BTreeMap;
        const K: u64 = 3;
        let (writers, readers) = bounded_partitions(2, K, |_| BTreeMap::<u32, u64>::new());
        let handles: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(w, mut mine)| {
                let mut other = readers[1 - w].clone();
                std::thread::spawn(move || {
                    for key in (0..1000u32).filter(|k| partition(k, 2) == w) {
                        mine.update(|m| *m.entry(key).or_default() += 1);
                        // The other partition's keys are never this worker's.
                        assert!(other.get().keys().all(|k| partition(k, 2) == 1 - w));
                    }
                    mine.publish();
                    mine.updates()
                })
            })
            .collect();
        let updates: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(updates.iter().sum::<u64>(), 1000);
        let mut readers = readers;
        for (w, r) in readers.iter_mut().enumerate() {
            let s = r.get();
            assert_eq!(s.updates, updates[w]);
            assert!(s.iter().all(|(k, n)| *n == 1 && partition(k, 2) == w));
        }
    }

    /// Transfers between accounts under strict state: every reader sees the total unchanged
    /// (no transaction is seen half done).
    #[test]
    fn strict_transactions_are_atomic() {
        let accounts = Strict::new(vec![100i64; 4]);
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let a = accounts.clone();
                std::thread::spawn(move || {
                    for i in 0..5000usize {
                        a.write(|v| {
                            let (from, to) = ((i + t) % 4, (i * 3 + 1 + t) % 4);
                            v[from] -= 7;
                            v[to] += 7;
                        });
                    }
                })
            })
            .collect();
        let a = accounts.clone();
        let reader = std::thread::spawn(move || {
            for _ in 0..5000 {
                assert_eq!(a.read(|v| v.iter().sum::<i64>()), 400);
            }
        });
        writers.into_iter().for_each(|h| h.join().unwrap());
        reader.join().unwrap();
        assert_eq!(accounts.read(|v| v.iter().sum::<i64>()), 400);
    }
}
