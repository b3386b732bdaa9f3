//! Which worker a packet goes to.
//!
//! *Decision:* a packet goes to worker `symmetric RSS hash % N` of its 5-tuple
//! ([`packet::FlowKey::rss_hash`]: the Toeplitz hash under the symmetric key, equal for a
//! flow and its reverse), so a flow's two directions meet on one worker, as NIC RSS with
//! that key would place them. Frames without an IP 5-tuple (ARP, other EtherTypes,
//! unparsable IP) go to worker 0: they carry no flow, and one fixed worker keeps them in
//! order among themselves (an `ARPQuerier` replica on another worker does not learn from
//! them: per-worker ARP state is a known limit). Later IP fragments have no ports and
//! hash on their addresses alone, as NIC RSS does.
//!
//! *Decision:* replies to a NAT come back to the NAT's public address and a port of its
//! pool; their 5-tuple is not the one the flow had when it was hashed on the inside, so RSS
//! would send them to any worker. Each worker's NAT allocates only from its own slice of
//! the pool ([`elements::capability::slice`]), so the port says which worker made the
//! mapping: a TCP or UDP packet whose destination (address, port) lies in a rewriter's
//! pool goes to the worker whose slice holds it ([`elements::capability::Pool::owner`]).
//! That is one comparison per pool, no shared table to lock or keep in step (SNF's per-core
//! rewriters), and the same rule works for offline input and live ports. Pools that keep
//! the packet's own source address (`- 1000-2000 - -`) are still sliced, but their replies
//! cannot be told from other traffic and are hashed like any flow.

use chain::Executor;
use elements::capability::Pool;
use packet::FlowKey;
use std::net::IpAddr;
use wire::ip::protocol::{TCP, UDP};

/// DCCP, which `UDPRewriter` maps too.
const DCCP: u8 = 33;

/// Picks each packet's worker (see the module documentation for the rule).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    workers: usize,
    pools: Vec<Pool>,
}

impl Dispatcher {
    /// A dispatcher over `workers` workers (at least one) steering replies to `pools`.
    pub fn new(workers: usize, pools: Vec<Pool>) -> Dispatcher {
        Dispatcher {
            workers: workers.max(1),
            pools: pools.into_iter().filter(|p| p.addrs.is_some()).collect(),
        }
    }

    /// A dispatcher for the chain `ex` holds (built, not yet split among workers): the
    /// pools of every element with a worker share.
    pub fn for_chain(ex: &mut Executor, workers: usize) -> Dispatcher {
        let mut pools = Vec::new();
        for g in 0..ex.element_count() {
            if let Some(s) = ex.element_mut(g).worker_share() {
                pools.extend(s.pools());
            }
        }
        Dispatcher::new(workers, pools)
    }

    /// How many workers there are.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The pools replies are steered by.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// The worker for the Ethernet frame `frame`.
    #[inline]
    pub fn worker(&self, frame: &[u8]) -> usize {
        if self.workers == 1 {
            return 0;
        }
        match FlowKey::from_ethernet(frame) {
            Some(key) => self.worker_of(&key),
            None => 0,
        }
    }

    /// The worker for a packet of flow `key` (as it arrives).
    #[inline]
    pub fn worker_of(&self, key: &FlowKey) -> usize {
        if let (IpAddr::V4(dst), TCP | UDP | DCCP) = (key.dst, key.protocol) {
            for p in &self.pools {
                if let Some(w) = p.owner(dst, key.dst_port, self.workers) {
                    return w;
                }
            }
        }
        (key.rss_hash() as usize) % self.workers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elements::capability::{slice, Sliced};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;
    use wire::build::Frame;

    fn napt_pool() -> Pool {
        Pool {
            addrs: Some((Ipv4Addr::new(10, 0, 0, 1), 1)),
            ports: Some((1000, 8001)),
            sliced: Sliced::Ports,
        }
    }

    proptest! {
        /// Both directions of any TCP or UDP flow go to the same worker.
        #[test]
        fn both_directions_meet(
            s in any::<[u8; 4]>(), d in any::<[u8; 4]>(), sp in any::<u16>(), dp in any::<u16>(),
            udp in any::<bool>(), n in 1usize..9,
        ) {
            let disp = Dispatcher::new(n, Vec::new());
            let (f, r) = if udp {
                (Frame::udp(s, d, sp, dp).build(), Frame::udp(d, s, dp, sp).build())
            } else {
                (Frame::tcp(s, d, sp, dp).build(), Frame::tcp(d, s, dp, sp).build())
            };
            let w = disp.worker(&f);
            prop_assert!(w < n);
            prop_assert_eq!(w, disp.worker(&r));
        }

        /// A reply to a port of a NAT's pool goes to the worker whose slice holds the port,
        /// whatever its source.
        #[test]
        fn replies_go_to_the_slice_owner(
            src in any::<[u8; 4]>(), sport in any::<u16>(), port in 1000u16..=9000, n in 1usize..9,
        ) {
            let disp = Dispatcher::new(n, vec![napt_pool()]);
            let frame = Frame::udp(src, [10, 0, 0, 1], sport, port).build();
            let w = disp.worker(&frame);
            let (off, len) = slice(8001, w, n);
            let v = u64::from(port - 1000);
            prop_assert!(off <= v && v < off + len, "port {} worker {} of {}", port, w, n);
        }
    }

    #[test]
    fn frames_without_a_flow_go_to_worker_zero() {
        let disp = Dispatcher::new(4, vec![napt_pool()]);
        let arp = wire::build::Arp::request([2, 0, 0, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 1]);
        assert_eq!(disp.worker(&arp.build()), 0);
        assert_eq!(disp.worker(&[0u8; 10]), 0);
        assert_eq!(disp.worker(&[]), 0);
        // Outside the pool (port, address or protocol): hashed like any flow.
        for (frame, reverse) in [
            (
                Frame::udp([1, 2, 3, 4], [10, 0, 0, 1], 53, 999).build(),
                Frame::udp([10, 0, 0, 1], [1, 2, 3, 4], 999, 53).build(),
            ),
            (
                Frame::udp([1, 2, 3, 4], [10, 0, 0, 2], 53, 2000).build(),
                Frame::udp([10, 0, 0, 2], [1, 2, 3, 4], 2000, 53).build(),
            ),
        ] {
            assert_eq!(disp.worker(&frame), disp.worker(&reverse));
        }
        let one = Dispatcher::new(1, vec![napt_pool()]);
        assert_eq!(
            one.worker(&Frame::udp([1, 2, 3, 4], [10, 0, 0, 1], 5, 8000).build()),
            0
        );
    }
}
