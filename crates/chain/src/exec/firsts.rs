//! A flow's first packet in `--mode synth` and `--mode fastpath`, batched.
//!
//! Both modes remember a flow from its second packet on: a flow's first packet (no entry in
//! the mode's flow table, and the seen-filter had not noted the flow) is walked and
//! forgotten. Such a walk gives what the naive walk gives (the equivalence contract), so
//! the mode need not walk it at all: runs of first packets in a batch of inputs go through
//! the naive executor's batched path ([`Executor::run_batch`]) together, and every other
//! packet runs as before, packet by packet. Input order is kept: a run of first packets is
//! taken through before the next packet that is not one starts.
//!
//! Why the order of state updates is unchanged: the decision (flow key, table lookup, the
//! seen-filter's note) is the one the mode made when the packet arrived, in input order,
//! and nothing the earlier first packets do changes it (naive steps neither add to nor
//! remove from the mode's table). Before a run, the remembered flows' debts to the
//! rewriters are paid, as a naive step into a rewriter pays them; the packets of a run add
//! none. A run of scans, floods or short flows (every packet new) thus costs the naive
//! batched path plus one key and one filter look per packet.

use super::{fast, flows, Executor};
use packet::Packet;

/// What [`Executor::run_firsts`] reads of a packet before any runs.
enum Ahead {
    /// The fast path's key.
    Fast(fast::Entered),
    /// Synth's flow key (the entry is synthesized).
    Synth(u128),
    /// Neither: the packet runs as it would one by one.
    Naive,
}

/// In synth, first packets run naive only in chains whose elements' models all have at
/// most this many cases: past it an element is a filter (an `IPFilter` of rules, a
/// classifier) that naive scans rule by rule and synth's classes decide at once, so synth's
/// own walk is the cheaper one for a new flow (the ISP chain's 19-rule firewall: the walk
/// 3,029 Ir per packet, naive 3,510).
pub(super) const FILTER_CASES: usize = 8;

impl Executor {
    /// Whether runs of first packets take the naive batched path ([`Executor::run_firsts`]):
    /// one of the two modes is on, the chain batches, and nothing needs each packet alone
    /// (parallel groups, timed elements, entry hooks, trusted switch tags).
    pub(super) fn firsts_batched(&self) -> bool {
        if self.batch_plan.is_none()
            || self.par.is_some()
            || self.measures.clock.is_some()
            || self.entry_hooks
        {
            return false;
        }
        match (&self.fast, &self.synth.program) {
            (Some(_), None) => true,
            // Synth remembers flows only through rewriters (its seen-filter is empty
            // without them: every packet is then one classification anyway).
            (None, Some(_)) => {
                self.synth.firsts_naive && !self.synth.trust_tags && !self.synth.seen.is_empty()
            }
            _ => false,
        }
    }

    /// Whether this batch goes through [`Executor::run_firsts`]: when it may
    /// ([`Executor::firsts_batched`]) and the last batch that did held first packets, or
    /// every 16th batch otherwise. Reading every key ahead costs a batch of remembered flows
    /// (the steady state: no first packets) some 300 instructions a packet for nothing; the
    /// packet-by-packet path gives the same (it walks a first packet and forgets it), so a
    /// batch may take either, and the probe finds new flows again within 16 batches.
    pub(super) fn firsts_now(&mut self) -> bool {
        if !self.firsts_batched() {
            return false;
        }
        self.firsts_tick = self.firsts_tick.wrapping_add(1);
        self.firsts_likely || self.firsts_tick.is_multiple_of(16)
    }

    /// Runs `batch` (entries and packets, in input order) to completion: first packets of
    /// flows in runs through [`Executor::run_batch`], the others one by one as
    /// [`Executor::push_all`] would. Only when [`Executor::firsts_batched`].
    pub(super) fn run_firsts(&mut self, batch: &mut Vec<((usize, usize), Packet)>) {
        // Every packet's key first, with the seen-filter slot it will be checked in read
        // ahead: the batch's cache misses on the filter overlap instead of coming one per
        // packet (the keys are the packets' as they arrived: nothing ran yet).
        let mut slots: Vec<usize> = Vec::with_capacity(batch.len());
        let mut keys: Vec<Ahead> = Vec::with_capacity(batch.len());
        for (entry, p) in batch.iter() {
            let el = self.base[entry.0] + entry.1 as u32;
            keys.push(if self.fast.is_some() {
                let (e, slot) = self.fast_key(el, p.data());
                slots.push(slot);
                Ahead::Fast(e)
            } else if self.synthesized(el) {
                let k = flows::flow_key(el, p.data());
                slots.push(flows::seen_slot(&self.synth.seen, k));
                Ahead::Synth(k)
            } else {
                Ahead::Naive
            });
        }
        let seen = if self.fast.is_some() {
            self.fast_seen()
        } else {
            &self.synth.seen
        };
        let mut acc = 0u64;
        for &s in &slots {
            acc = acc.wrapping_add(seen.get(s).copied().unwrap_or(0));
        }
        // The flow table's slots too: the remembered flows among a batch's packets have
        // their entries' cache misses overlap as well.
        for k in &keys {
            if let Ahead::Fast(e) = k {
                acc = acc.wrapping_add(self.fast_touch(e));
            }
        }
        std::hint::black_box(acc);
        // First packets gather in `batch` (emptied, its allocation kept) until a packet
        // that is not one: the run goes through, then that packet.
        let mut inputs = std::mem::replace(batch, std::mem::take(&mut self.firsts_spare));
        let mut firsts = 0usize;
        for ((entry, mut p), k) in inputs.drain(..).zip(keys) {
            let entered = match k {
                Ahead::Fast(e) => match self.fast_first(&mut p, e) {
                    Ok(()) => None,
                    Err(k) => Some(Some(k)),
                },
                Ahead::Synth(key) if self.synth_first(key) => None,
                Ahead::Synth(_) | Ahead::Naive => Some(None),
            };
            match entered {
                None => {
                    firsts += 1;
                    batch.push((entry, p));
                }
                Some(k) => {
                    self.run_first_run(batch);
                    self.push_in_keyed(entry, p, k);
                }
            }
        }
        self.run_first_run(batch);
        self.firsts_spare = inputs;
        self.firsts_likely = firsts > 0;
    }

    /// Whether synth's walk of the packet of flow `key` (entering a synthesized entry)
    /// would forget it: the flow has no entry, and the seen-filter had not noted it (it is
    /// noted now, as the walk's end would note it).
    fn synth_first(&mut self, key: u128) -> bool {
        !self.synth.flows.contains_key(&key) && !flows::seen_again(&mut self.synth.seen, key)
    }

    /// Takes a run of first packets through the naive batched path, the remembered flows'
    /// debts paid first.
    fn run_first_run(&mut self, firsts: &mut Vec<((usize, usize), Packet)>) {
        if firsts.is_empty() {
            return;
        }
        self.flush_flows();
        self.synth.guards = None;
        // The modes' hooks have nothing to do for these packets: nothing records them, the
        // debts are paid and the run adds none (a rewriter's step pays nothing).
        // (A reflecting exit's reply enters the mode again, hooks needed: they stay on.)
        let reflects = self.exits.iter().any(|x| x.reflect_to.is_some());
        let hooks = self.mode_hooks;
        self.mode_hooks = hooks && reflects;
        self.run_batch(firsts);
        self.mode_hooks = hooks;
    }
}
