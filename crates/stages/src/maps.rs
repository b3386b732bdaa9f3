//! Rust mirrors of `bpf/cbox.h`: the map keys and values with explicit byte encodings (no
//! transmute), the counter indices and the flags. Each struct's field offsets are constants
//! ([`FLOW_KEY_LAYOUT`], ...) used by the encoders; the tests compare them with the BTF of
//! the compiled objects, so the C and Rust sides cannot drift.

use std::net::Ipv4Addr;

/// Most context bytes an NSH carries through the stages (`NSH_MAX_CTX`).
pub const NSH_MAX_CTX: usize = 32;
/// Counters per stage in the counters map (`CTR_PER_STAGE`).
pub const CTR_PER_STAGE: usize = 16;
/// Stages with counters (`STAGES`).
pub const STAGES: usize = 4;

/// `nsh_meta.flags`: Enc learned this proxy key from an SF's translated packet.
pub const PROXY_LEARNED: u8 = 0x1;
/// `nsh_meta.flags`: written by the controller (direct-link corner cases).
pub const PROXY_STATIC: u8 = 0x2;
/// `nsh_meta.flags`: told by a FuseBox SF, which knows its own rewrites
/// (`fusebox run --tell-proxy`).
pub const PROXY_TOLD: u8 = 0x4;
/// `fwd_val.flags`: redirect to the interface's ingress.
pub const FWDF_INGRESS: u8 = 0x1;
/// `stage_cfg.flags`: Dec takes NSH frames whatever their destination MAC.
pub const CFG_ANY_DST: u16 = 0x1;
/// `stage_cfg.flags`: Enc learns translated 5-tuples from `last_dec` on a proxy miss.
pub const CFG_NAT_LEARN: u16 = 0x2;
/// `stage_cfg.flags`: Dec writes the interface's MAC into the decapsulated frame's
/// destination (a kernel SF, a Linux router, takes the frame as its own).
pub const CFG_TO_HOST: u16 = 0x4;

/// Map sizes (`CLS_ENTRIES`, `PROXY_ENTRIES`, `FWD_ENTRIES`, `CFG_ENTRIES`).
pub const CLS_ENTRIES: u32 = 4096;
/// Proxy table size.
pub const PROXY_ENTRIES: u32 = 65536;
/// Forwarding table size.
pub const FWD_ENTRIES: u32 = 4096;
/// Configuration map size.
pub const CFG_ENTRIES: u32 = 64;
/// Slots of the forwarding table's array part (`fwd_slots`, cbox.h).
pub const FWD_SLOTS: u32 = 4096;

/// Slots of the classifier's array part (`cls_slots`, cbox.h).
pub const CLS_SLOTS: u32 = 4096;

/// The slot of classifier key `key` in `cls_slots`, cbox.h's `CLS_SLOT`: a hash of the key's
/// five 32-bit words as the map holds them (host order), folded and multiplied, the top 12
/// bits of the product. Always below [`CLS_SLOTS`].
pub fn cls_slot(key: &ClsKey) -> u32 {
    let b = key.to_bytes();
    let w = |i: usize| u32::from_ne_bytes(get(&b, i * 4));
    let h = w(0) ^ w(1).rotate_left(12) ^ w(2) ^ w(3).rotate_left(16) ^ w(4).rotate_left(5);
    h.wrapping_mul(0x9e37_79b1) >> 20
}

/// Slots of the proxy table's cache (`proxy_slots`, cbox.h).
pub const PROXY_SLOTS: u32 = 8192;

/// The slot of 5-tuple `key` in `proxy_slots`, cbox.h's `PROXY_SLOT`: the key's four 32-bit
/// words as the map holds them (host order), folded and multiplied, the top 13 bits of the
/// product. Always below [`PROXY_SLOTS`].
pub fn proxy_slot(key: &FlowKey) -> u32 {
    let b = key.to_bytes();
    let w = |i: usize| u32::from_ne_bytes(get(&b, i * 4));
    let h = w(0) ^ w(1).rotate_left(12) ^ w(2) ^ w(3).rotate_left(21);
    h.wrapping_mul(0x9e37_79b1) >> 19
}

/// Slots of the configuration's array part (`cfg_slots`, cbox.h).
pub const CFG_SLOTS: u32 = 256;

/// The slot of interface `ifindex` in `cfg_slots`: `ifindex` mod 256, cbox.h's `CFG_SLOT`.
pub fn cfg_slot(ifindex: u32) -> u32 {
    ifindex & 0xff
}

/// The slot of SPH `sph` (SPI << 8 | SI) in `fwd_slots`: (SPI mod 64) * 64 + (255 − SI) mod
/// 64, cbox.h's `FWD_SLOT`. Always below [`FWD_SLOTS`].
pub fn fwd_slot(sph: u32) -> u32 {
    ((sph >> 2) & 0xfc0) | (!sph & 0x3f)
}

/// A struct's layout as the encoders use it: C name, size, (field, byte offset) pairs.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The struct's name in cbox.h.
    pub name: &'static str,
    /// Its size in bytes.
    pub size: usize,
    /// Its fields and their byte offsets.
    pub fields: &'static [(&'static str, usize)],
}

/// `struct flow_key`.
pub const FLOW_KEY_LAYOUT: Layout = Layout {
    name: "flow_key",
    size: 16,
    fields: &[
        ("saddr", 0),
        ("daddr", 4),
        ("sport", 8),
        ("dport", 10),
        ("proto", 12),
        ("pad", 13),
    ],
};
/// `struct cls_key`.
pub const CLS_KEY_LAYOUT: Layout = Layout {
    name: "cls_key",
    size: 20,
    fields: &[("ifindex", 0), ("flow", 4)],
};
/// `struct nsh_meta`.
pub const NSH_META_LAYOUT: Layout = Layout {
    name: "nsh_meta",
    size: 40,
    fields: &[
        ("sph", 0),
        ("md_type", 4),
        ("ttl", 5),
        ("ctx_len", 6),
        ("flags", 7),
        ("ctx", 8),
    ],
};
/// `struct fwd_val`.
pub const FWD_VAL_LAYOUT: Layout = Layout {
    name: "fwd_val",
    size: 32,
    fields: &[
        ("action", 0),
        ("flags", 1),
        ("dmac", 2),
        ("smac", 8),
        ("udp_sport", 14),
        ("ifindex", 16),
        ("saddr", 20),
        ("daddr", 24),
        ("vni", 28),
    ],
};
/// `struct fwd_ent`.
pub const FWD_ENT_LAYOUT: Layout = Layout {
    name: "fwd_ent",
    size: 36,
    fields: &[("sph", 0), ("val", 4)],
};
/// `struct fwd_ver`: one version of a forwarding slot, a cache line.
pub const FWD_VER_LAYOUT: Layout = Layout {
    name: "fwd_ver",
    size: 64,
    fields: &[("live", 0), ("pad", 1), ("ent", 4), ("tail", 40)],
};
/// `struct fwd_slot`.
pub const FWD_SLOT_LAYOUT: Layout = Layout {
    name: "fwd_slot",
    size: 128,
    fields: &[("ver", 0)],
};
/// `struct cls_ent`: one version of a classifier slot, a cache line.
pub const CLS_ENT_LAYOUT: Layout = Layout {
    name: "cls_ent",
    size: 64,
    fields: &[
        ("used", 0),
        ("live", 1),
        ("spill", 2),
        ("key", 4),
        ("meta", 24),
    ],
};
/// `struct cls_slot`: two versions, a cache line each.
pub const CLS_SLOT_LAYOUT: Layout = Layout {
    name: "cls_slot",
    size: 128,
    fields: &[("ent", 0)],
};
/// `struct cfg_ent`.
pub const CFG_ENT_LAYOUT: Layout = Layout {
    name: "cfg_ent",
    size: 16,
    fields: &[("ifindex", 0), ("cfg", 4)],
};
/// `struct cfg_slot`.
pub const CFG_SLOT_LAYOUT: Layout = Layout {
    name: "cfg_slot",
    size: 36,
    fields: &[("live", 0), ("pad", 1), ("ent", 4)],
};
/// `struct stage_cfg`.
pub const STAGE_CFG_LAYOUT: Layout = Layout {
    name: "stage_cfg",
    size: 12,
    fields: &[("mac", 0), ("flags", 6), ("ifindex", 8)],
};
/// `struct proxy_slot`.
pub const PROXY_SLOT_LAYOUT: Layout = Layout {
    name: "proxy_slot",
    size: 72,
    fields: &[
        ("seq", 0),
        ("valid", 4),
        ("gen", 8),
        ("key", 16),
        ("meta", 32),
    ],
};
/// Every layout, for the BTF test.
pub const LAYOUTS: [Layout; 13] = [
    PROXY_SLOT_LAYOUT,
    FLOW_KEY_LAYOUT,
    CLS_KEY_LAYOUT,
    NSH_META_LAYOUT,
    FWD_VAL_LAYOUT,
    FWD_ENT_LAYOUT,
    FWD_VER_LAYOUT,
    FWD_SLOT_LAYOUT,
    STAGE_CFG_LAYOUT,
    CFG_ENT_LAYOUT,
    CFG_SLOT_LAYOUT,
    CLS_ENT_LAYOUT,
    CLS_SLOT_LAYOUT,
];

fn off(l: &Layout, field: &str) -> usize {
    l.fields.iter().find(|f| f.0 == field).map_or(0, |f| f.1)
}

fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(at..at + N) {
        out.copy_from_slice(s);
    }
    out
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

/// A byte encoding failed: the map handed back a value of the wrong size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {got} bytes, expected {want}")]
pub struct SizeError {
    /// The struct.
    pub what: &'static str,
    /// Bytes received.
    pub got: usize,
    /// Bytes expected.
    pub want: usize,
}

fn check(l: &Layout, b: &[u8]) -> Result<(), SizeError> {
    if b.len() == l.size {
        Ok(())
    } else {
        Err(SizeError {
            what: l.name,
            got: b.len(),
            want: l.size,
        })
    }
}

/// The inner 5-tuple (`struct flow_key`); addresses and ports in host form here, network
/// order in the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub saddr: Ipv4Addr,
    /// Destination address.
    pub daddr: Ipv4Addr,
    /// Source port (0 for protocols without ports).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol.
    pub proto: u8,
}

impl FlowKey {
    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 16] {
        let l = &FLOW_KEY_LAYOUT;
        let mut b = [0u8; 16];
        put(&mut b, off(l, "saddr"), &self.saddr.octets());
        put(&mut b, off(l, "daddr"), &self.daddr.octets());
        put(&mut b, off(l, "sport"), &self.sport.to_be_bytes());
        put(&mut b, off(l, "dport"), &self.dport.to_be_bytes());
        put(&mut b, off(l, "proto"), &[self.proto]);
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<FlowKey, SizeError> {
        let l = &FLOW_KEY_LAYOUT;
        check(l, b)?;
        Ok(FlowKey {
            saddr: Ipv4Addr::from(get::<4>(b, off(l, "saddr"))),
            daddr: Ipv4Addr::from(get::<4>(b, off(l, "daddr"))),
            sport: u16::from_be_bytes(get(b, off(l, "sport"))),
            dport: u16::from_be_bytes(get(b, off(l, "dport"))),
            proto: get::<1>(b, off(l, "proto"))[0],
        })
    }
}

/// The classifier key (`struct cls_key`): ingress interface (0 = any) and 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClsKey {
    /// Ingress interface index; 0 matches any interface.
    pub ifindex: u32,
    /// The 5-tuple.
    pub flow: FlowKey,
}

impl ClsKey {
    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 20] {
        let l = &CLS_KEY_LAYOUT;
        let mut b = [0u8; 20];
        put(&mut b, off(l, "ifindex"), &self.ifindex.to_ne_bytes());
        put(&mut b, off(l, "flow"), &self.flow.to_bytes());
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<ClsKey, SizeError> {
        let l = &CLS_KEY_LAYOUT;
        check(l, b)?;
        let f = off(l, "flow");
        Ok(ClsKey {
            ifindex: u32::from_ne_bytes(get(b, off(l, "ifindex"))),
            flow: FlowKey::from_bytes(&b[f..f + FLOW_KEY_LAYOUT.size])?,
        })
    }
}

/// An NSH without its constants (`struct nsh_meta`): what Cls pushes, what Dec saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NshMeta {
    /// SPI << 8 | SI.
    pub sph: u32,
    /// MD type (1 or 2).
    pub md_type: u8,
    /// TTL (6 bits; in a classifier entry 0 means 63).
    pub ttl: u8,
    /// Context bytes used: 16 for MD type 1; 0..=32, a multiple of 4, for MD type 2.
    pub ctx_len: u8,
    /// `PROXY_*` flags.
    pub flags: u8,
    /// Context (MD type 1: four words; MD type 2: the TLVs), zero past `ctx_len`.
    pub ctx: [u8; NSH_MAX_CTX],
}

/// An NSH context that does not fit a [`NshMeta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("NSH context of {0} bytes: MD type 2 carries at most 32, in whole 4-byte words")]
pub struct ContextError(pub usize);

impl NshMeta {
    /// MD type 1 with SPI, SI, TTL and the four context words (host order; written in
    /// network order as on the wire).
    pub fn md1(spi: u32, si: u8, ttl: u8, ctx: [u32; 4]) -> NshMeta {
        let mut c = [0u8; NSH_MAX_CTX];
        for (i, w) in ctx.iter().enumerate() {
            c[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        NshMeta {
            sph: (spi & 0x00ff_ffff) << 8 | u32::from(si),
            md_type: 1,
            ttl,
            ctx_len: 16,
            flags: 0,
            ctx: c,
        }
    }

    /// MD type 2 with SPI, SI, TTL and the encoded TLVs (a multiple of 4, at most 32 bytes).
    pub fn md2(spi: u32, si: u8, ttl: u8, tlvs: &[u8]) -> Result<NshMeta, ContextError> {
        if tlvs.len() > NSH_MAX_CTX || !tlvs.len().is_multiple_of(4) {
            return Err(ContextError(tlvs.len()));
        }
        let mut c = [0u8; NSH_MAX_CTX];
        c[..tlvs.len()].copy_from_slice(tlvs);
        Ok(NshMeta {
            sph: (spi & 0x00ff_ffff) << 8 | u32::from(si),
            md_type: 2,
            ttl,
            ctx_len: tlvs.len() as u8,
            flags: 0,
            ctx: c,
        })
    }

    /// The service path identifier.
    pub fn spi(&self) -> u32 {
        self.sph >> 8
    }

    /// The service index.
    pub fn si(&self) -> u8 {
        self.sph as u8
    }

    /// The context bytes in use.
    pub fn context(&self) -> &[u8] {
        &self.ctx[..usize::from(self.ctx_len).min(NSH_MAX_CTX)]
    }

    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 40] {
        let l = &NSH_META_LAYOUT;
        let mut b = [0u8; 40];
        put(&mut b, off(l, "sph"), &self.sph.to_ne_bytes());
        put(&mut b, off(l, "md_type"), &[self.md_type]);
        put(&mut b, off(l, "ttl"), &[self.ttl]);
        put(&mut b, off(l, "ctx_len"), &[self.ctx_len]);
        put(&mut b, off(l, "flags"), &[self.flags]);
        put(&mut b, off(l, "ctx"), &self.ctx);
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<NshMeta, SizeError> {
        let l = &NSH_META_LAYOUT;
        check(l, b)?;
        Ok(NshMeta {
            sph: u32::from_ne_bytes(get(b, off(l, "sph"))),
            md_type: get::<1>(b, off(l, "md_type"))[0],
            ttl: get::<1>(b, off(l, "ttl"))[0],
            ctx_len: get::<1>(b, off(l, "ctx_len"))[0],
            flags: get::<1>(b, off(l, "flags"))[0],
            ctx: get(b, off(l, "ctx")),
        })
    }
}

/// What Fwd does with a service path hop (`FWD_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FwdAction {
    /// Next hop over Ethernet transport.
    Ethernet,
    /// Next hop over a VXLAN-GPE tunnel.
    VxlanGpe,
    /// End of path: decapsulate and deliver.
    End,
    /// A value this crate does not know (kept so decoding never fails).
    Other(u8),
}

impl FwdAction {
    /// The `FWD_*` value.
    pub fn code(self) -> u8 {
        match self {
            FwdAction::Ethernet => 1,
            FwdAction::VxlanGpe => 2,
            FwdAction::End => 3,
            FwdAction::Other(v) => v,
        }
    }

    /// From a `FWD_*` value.
    pub fn from_code(v: u8) -> FwdAction {
        match v {
            1 => FwdAction::Ethernet,
            2 => FwdAction::VxlanGpe,
            3 => FwdAction::End,
            v => FwdAction::Other(v),
        }
    }
}

/// The forwarding table's value (`struct fwd_val`), keyed by SPH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FwdVal {
    /// What to do.
    pub action: FwdAction,
    /// `FWDF_*` flags.
    pub flags: u8,
    /// Next hop's MAC.
    pub dmac: [u8; 6],
    /// Our MAC on the egress interface.
    pub smac: [u8; 6],
    /// VXLAN-GPE UDP source port (0 = derived from the inner flow).
    pub udp_sport: u16,
    /// Redirect to this interface (0 = stay).
    pub ifindex: u32,
    /// VXLAN-GPE outer source address.
    pub saddr: Ipv4Addr,
    /// VXLAN-GPE tunnel endpoint.
    pub daddr: Ipv4Addr,
    /// VXLAN-GPE VNI (24 bits).
    pub vni: u32,
}

impl FwdVal {
    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 32] {
        let l = &FWD_VAL_LAYOUT;
        let mut b = [0u8; 32];
        put(&mut b, off(l, "action"), &[self.action.code()]);
        put(&mut b, off(l, "flags"), &[self.flags]);
        put(&mut b, off(l, "dmac"), &self.dmac);
        put(&mut b, off(l, "smac"), &self.smac);
        put(&mut b, off(l, "udp_sport"), &self.udp_sport.to_ne_bytes());
        put(&mut b, off(l, "ifindex"), &self.ifindex.to_ne_bytes());
        put(&mut b, off(l, "saddr"), &self.saddr.octets());
        put(&mut b, off(l, "daddr"), &self.daddr.octets());
        put(&mut b, off(l, "vni"), &self.vni.to_ne_bytes());
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<FwdVal, SizeError> {
        let l = &FWD_VAL_LAYOUT;
        check(l, b)?;
        Ok(FwdVal {
            action: FwdAction::from_code(get::<1>(b, off(l, "action"))[0]),
            flags: get::<1>(b, off(l, "flags"))[0],
            dmac: get(b, off(l, "dmac")),
            smac: get(b, off(l, "smac")),
            udp_sport: u16::from_ne_bytes(get(b, off(l, "udp_sport"))),
            ifindex: u32::from_ne_bytes(get(b, off(l, "ifindex"))),
            saddr: Ipv4Addr::from(get::<4>(b, off(l, "saddr"))),
            daddr: Ipv4Addr::from(get::<4>(b, off(l, "daddr"))),
            vni: u32::from_ne_bytes(get(b, off(l, "vni"))),
        })
    }
}

/// A slot of `fwd_slots` (`struct fwd_slot`): two versions of one forwarding entry and which
/// one packets read (cbox.h). A version is `None` when empty (action 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FwdSlot {
    /// The version packets read: 0 or 1.
    pub live: u8,
    /// The two versions: (SPH, entry).
    pub ent: [Option<(u32, FwdVal)>; 2],
}

impl FwdSlot {
    /// The live version: (SPH, entry), if not empty.
    pub fn current(&self) -> Option<(u32, FwdVal)> {
        self.ent[usize::from(self.live & 1)]
    }

    /// Where version `i`'s entry starts in the map encoding.
    fn ent_at(i: usize) -> usize {
        off(&FWD_SLOT_LAYOUT, "ver") + i * FWD_VER_LAYOUT.size + off(&FWD_VER_LAYOUT, "ent")
    }

    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[off(&FWD_VER_LAYOUT, "live")] = self.live & 1;
        for (i, e) in self.ent.iter().enumerate() {
            if let Some((sph, val)) = e {
                let at = Self::ent_at(i);
                put(&mut b, at + off(&FWD_ENT_LAYOUT, "sph"), &sph.to_ne_bytes());
                put(&mut b, at + off(&FWD_ENT_LAYOUT, "val"), &val.to_bytes());
            }
        }
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<FwdSlot, SizeError> {
        check(&FWD_SLOT_LAYOUT, b)?;
        let mut out = FwdSlot {
            live: b[off(&FWD_VER_LAYOUT, "live")] & 1,
            ent: [None; 2],
        };
        for (i, e) in out.ent.iter_mut().enumerate() {
            let at = Self::ent_at(i);
            let v = at + off(&FWD_ENT_LAYOUT, "val");
            let val = FwdVal::from_bytes(b.get(v..v + FWD_VAL_LAYOUT.size).unwrap_or(&[]))?;
            if val.action.code() != 0 {
                *e = Some((u32::from_ne_bytes(get(b, at)), val));
            }
        }
        Ok(out)
    }
}

/// The next hop the instance caches in a classifier slot's MD type 1 entry for Cls+Fwd
/// (`struct cls_hop`, cbox.h): the Ethernet next hop that redirects of the entry's (SPI, SI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClsHop {
    /// The next hop's MAC (outer destination).
    pub dmac: [u8; 6],
    /// Our MAC on the egress interface (outer source).
    pub smac: [u8; 6],
    /// The interface the frame is redirected to (not 0).
    pub ifindex: u32,
    /// Redirected to that interface's ingress (`FWDF_INGRESS`).
    pub ingress: bool,
}

impl ClsHop {
    /// The hop cached for a forwarding entry: an Ethernet next hop that redirects; `None` for
    /// any other (Cls+Fwd then reads the forwarding table).
    pub fn of(val: &FwdVal) -> Option<ClsHop> {
        (val.action == FwdAction::Ethernet && val.ifindex != 0).then_some(ClsHop {
            dmac: val.dmac,
            smac: val.smac,
            ifindex: val.ifindex,
            ingress: val.flags & FWDF_INGRESS != 0,
        })
    }
}

/// `nsh_meta.flags` of a classifier entry whose context bytes 16..32 hold a [`ClsHop`].
const CLS_HOP: u8 = 0x40;
/// And whose hop redirects to the interface's ingress.
const CLS_HOP_INGRESS: u8 = 0x80;
/// Where the hop starts in the context.
const CLS_HOP_AT: usize = 16;

/// One version of a `cls_slots` slot (`struct cls_ent`): an entry or none, the next hop cached
/// with it, and how many keys of the slot live in the hash `cls_table` (cbox.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClsVersion {
    /// The entry (key, NSH), if the version holds one (`used`).
    pub entry: Option<(ClsKey, NshMeta)>,
    /// Keys of this slot in the hash (`spill`).
    pub spill: u16,
    /// The next hop cached with an MD type 1 entry (written only with one).
    pub hop: Option<ClsHop>,
}

/// A slot of `cls_slots` (`struct cls_slot`): two versions and which one packets read
/// (cbox.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClsSlot {
    /// The version packets read: 0 or 1.
    pub live: u8,
    /// The two versions.
    pub ent: [ClsVersion; 2],
}

impl ClsSlot {
    /// The live version.
    pub fn current(&self) -> ClsVersion {
        self.ent[usize::from(self.live & 1)]
    }

    /// Where version `i` starts in the map encoding.
    fn ent_at(i: usize) -> usize {
        off(&CLS_SLOT_LAYOUT, "ent") + i * CLS_ENT_LAYOUT.size
    }

    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[Self::ent_at(0) + off(&CLS_ENT_LAYOUT, "live")] = self.live & 1;
        for (i, e) in self.ent.iter().enumerate() {
            let at = Self::ent_at(i);
            put(
                &mut b,
                at + off(&CLS_ENT_LAYOUT, "spill"),
                &e.spill.to_ne_bytes(),
            );
            if let Some((key, mut meta)) = e.entry {
                b[at + off(&CLS_ENT_LAYOUT, "used")] = 1;
                put(&mut b, at + off(&CLS_ENT_LAYOUT, "key"), &key.to_bytes());
                meta.flags &= !(CLS_HOP | CLS_HOP_INGRESS);
                if let (Some(h), 1) = (e.hop, meta.md_type) {
                    meta.flags |= CLS_HOP | if h.ingress { CLS_HOP_INGRESS } else { 0 };
                    let c = &mut meta.ctx[CLS_HOP_AT..];
                    c[..6].copy_from_slice(&h.dmac);
                    c[6..12].copy_from_slice(&h.smac);
                    c[12..16].copy_from_slice(&h.ifindex.to_ne_bytes());
                }
                put(&mut b, at + off(&CLS_ENT_LAYOUT, "meta"), &meta.to_bytes());
            }
        }
        b
    }

    /// The SPH of the live version's entry in the map encoding `b`, without decoding the
    /// rest (`None`: no entry, or not a slot's encoding): what a scan of every slot for one
    /// SPH's entries reads.
    pub fn live_sph(b: &[u8]) -> Option<u32> {
        let live = usize::from(*b.get(Self::ent_at(0) + off(&CLS_ENT_LAYOUT, "live"))? & 1);
        let at = Self::ent_at(live);
        if *b.get(at + off(&CLS_ENT_LAYOUT, "used"))? == 0 {
            return None;
        }
        let sph = at + off(&CLS_ENT_LAYOUT, "meta") + off(&NSH_META_LAYOUT, "sph");
        Some(u32::from_ne_bytes(b.get(sph..sph + 4)?.try_into().ok()?))
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<ClsSlot, SizeError> {
        check(&CLS_SLOT_LAYOUT, b)?;
        let mut out = ClsSlot {
            live: b[Self::ent_at(0) + off(&CLS_ENT_LAYOUT, "live")] & 1,
            ent: [ClsVersion::default(); 2],
        };
        for (i, e) in out.ent.iter_mut().enumerate() {
            let at = Self::ent_at(i);
            e.spill = u16::from_ne_bytes(get(b, at + off(&CLS_ENT_LAYOUT, "spill")));
            if b[at + off(&CLS_ENT_LAYOUT, "used")] != 0 {
                let k = at + off(&CLS_ENT_LAYOUT, "key");
                let m = at + off(&CLS_ENT_LAYOUT, "meta");
                let key = ClsKey::from_bytes(b.get(k..k + CLS_KEY_LAYOUT.size).unwrap_or(&[]))?;
                let mut meta =
                    NshMeta::from_bytes(b.get(m..m + NSH_META_LAYOUT.size).unwrap_or(&[]))?;
                if meta.flags & CLS_HOP != 0 && meta.md_type == 1 {
                    let c = &mut meta.ctx[CLS_HOP_AT..];
                    e.hop = Some(ClsHop {
                        dmac: get(c, 0),
                        smac: get(c, 6),
                        ifindex: u32::from_ne_bytes(get(c, 12)),
                        ingress: meta.flags & CLS_HOP_INGRESS != 0,
                    });
                    c.fill(0);
                }
                meta.flags &= !(CLS_HOP | CLS_HOP_INGRESS);
                e.entry = Some((key, meta));
            }
        }
        Ok(out)
    }
}

/// A slot of `cfg_slots` (`struct cfg_slot`): two versions of one interface's configuration
/// and which one packets read (cbox.h). A version is `None` when empty (ifindex 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CfgSlot {
    /// The version packets read: 0 or 1.
    pub live: u8,
    /// The two versions: (ifindex, configuration).
    pub ent: [Option<(u32, StageCfg)>; 2],
}

impl CfgSlot {
    /// The live version: (ifindex, configuration), if not empty.
    pub fn current(&self) -> Option<(u32, StageCfg)> {
        self.ent[usize::from(self.live & 1)]
    }

    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 36] {
        let mut b = [0u8; 36];
        b[0] = self.live & 1;
        for (i, e) in self.ent.iter().enumerate() {
            if let Some((ifindex, cfg)) = e {
                let at = off(&CFG_SLOT_LAYOUT, "ent") + i * CFG_ENT_LAYOUT.size;
                put(
                    &mut b,
                    at + off(&CFG_ENT_LAYOUT, "ifindex"),
                    &ifindex.to_ne_bytes(),
                );
                put(&mut b, at + off(&CFG_ENT_LAYOUT, "cfg"), &cfg.to_bytes());
            }
        }
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<CfgSlot, SizeError> {
        check(&CFG_SLOT_LAYOUT, b)?;
        let mut out = CfgSlot {
            live: b[0] & 1,
            ent: [None; 2],
        };
        for (i, e) in out.ent.iter_mut().enumerate() {
            let at = off(&CFG_SLOT_LAYOUT, "ent") + i * CFG_ENT_LAYOUT.size;
            let ifindex = u32::from_ne_bytes(get(b, at + off(&CFG_ENT_LAYOUT, "ifindex")));
            let c = at + off(&CFG_ENT_LAYOUT, "cfg");
            let cfg = StageCfg::from_bytes(b.get(c..c + STAGE_CFG_LAYOUT.size).unwrap_or(&[]))?;
            if ifindex != 0 {
                *e = Some((ifindex, cfg));
            }
        }
        Ok(out)
    }
}

/// A slot of `proxy_slots` (`struct proxy_slot`), the proxy table's cache (cbox.h): a copy
/// of one hash entry, which answers only while `seq == valid` (not 0) and `gen` is the slot's
/// current generation in `proxy_gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProxySlot {
    /// Sequence counter: odd while a stage writes the slot.
    pub seq: u32,
    /// The `seq` at which the copy is valid; 0: never filled.
    pub valid: u32,
    /// The slot's generation when the copy was made.
    pub gen: u64,
    /// The key copied.
    pub key: FlowKey,
    /// Its entry.
    pub meta: NshMeta,
}

impl ProxySlot {
    /// The (key, entry) the slot answers with while the slot's generation is `gen`, if any.
    pub fn answer(&self, gen: u64) -> Option<(FlowKey, NshMeta)> {
        (self.valid != 0 && self.seq == self.valid && self.gen == gen)
            .then_some((self.key, self.meta))
    }

    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 72] {
        let l = &PROXY_SLOT_LAYOUT;
        let mut b = [0u8; 72];
        put(&mut b, off(l, "seq"), &self.seq.to_ne_bytes());
        put(&mut b, off(l, "valid"), &self.valid.to_ne_bytes());
        put(&mut b, off(l, "gen"), &self.gen.to_ne_bytes());
        put(&mut b, off(l, "key"), &self.key.to_bytes());
        put(&mut b, off(l, "meta"), &self.meta.to_bytes());
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<ProxySlot, SizeError> {
        let l = &PROXY_SLOT_LAYOUT;
        check(l, b)?;
        let k = off(l, "key");
        let m = off(l, "meta");
        Ok(ProxySlot {
            seq: u32::from_ne_bytes(get(b, off(l, "seq"))),
            valid: u32::from_ne_bytes(get(b, off(l, "valid"))),
            gen: u64::from_ne_bytes(get(b, off(l, "gen"))),
            key: FlowKey::from_bytes(b.get(k..k + FLOW_KEY_LAYOUT.size).unwrap_or(&[]))?,
            meta: NshMeta::from_bytes(b.get(m..m + NSH_META_LAYOUT.size).unwrap_or(&[]))?,
        })
    }
}

/// One interface's configuration (`struct stage_cfg`), keyed by ifindex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StageCfg {
    /// The interface's MAC.
    pub mac: [u8; 6],
    /// `CFG_*` flags.
    pub flags: u16,
    /// The interface index.
    pub ifindex: u32,
}

impl StageCfg {
    /// The map encoding.
    pub fn to_bytes(&self) -> [u8; 12] {
        let l = &STAGE_CFG_LAYOUT;
        let mut b = [0u8; 12];
        put(&mut b, off(l, "mac"), &self.mac);
        put(&mut b, off(l, "flags"), &self.flags.to_ne_bytes());
        put(&mut b, off(l, "ifindex"), &self.ifindex.to_ne_bytes());
        b
    }

    /// Decodes the map encoding.
    pub fn from_bytes(b: &[u8]) -> Result<StageCfg, SizeError> {
        let l = &STAGE_CFG_LAYOUT;
        check(l, b)?;
        Ok(StageCfg {
            mac: get(b, off(l, "mac")),
            flags: u16::from_ne_bytes(get(b, off(l, "flags"))),
            ifindex: u32::from_ne_bytes(get(b, off(l, "ifindex"))),
        })
    }
}

/// The stages that count (`STAGE_*`): the counters map's first index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CounterStage {
    /// Cls.
    Cls = 0,
    /// Dec.
    Dec = 1,
    /// Enc (and the Enc half of Enc+Fwd).
    Enc = 2,
    /// Fwd (and the Fwd half of Enc+Fwd).
    Fwd = 3,
}

impl CounterStage {
    /// Every counting stage.
    pub const ALL: [CounterStage; STAGES] = [
        CounterStage::Cls,
        CounterStage::Dec,
        CounterStage::Enc,
        CounterStage::Fwd,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            CounterStage::Cls => "cls",
            CounterStage::Dec => "dec",
            CounterStage::Enc => "enc",
            CounterStage::Fwd => "fwd",
        }
    }
}

/// A counter of a stage (`CTR_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// Every packet the stage saw.
    Packets = 0,
    /// Not the stage's traffic: left untouched.
    Passed = 1,
    /// Classified / decapsulated / encapsulated / forwarded.
    Done = 2,
    /// End of path: decapsulated and delivered.
    Delivered = 3,
    /// Enc: proxy entries learned (NAT-aware).
    Learned = 4,
    /// Headers shorter than they say.
    DropTruncated = 5,
    /// Version, length or MD type not supported.
    DropBadNsh = 6,
    /// No forwarding entry for (SPI, SI).
    DropUnknownSpi = 7,
    /// NSH TTL expired.
    DropTtl = 8,
    /// The kernel refused to grow or shrink the packet.
    DropNoRoom = 9,
    /// Inner frame is not Ethernet + IPv4.
    DropInner = 10,
    /// Enc: no proxy entry for the 5-tuple (passed untouched).
    ProxyMiss = 11,
}

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Counter; 12] = [
        Counter::Packets,
        Counter::Passed,
        Counter::Done,
        Counter::Delivered,
        Counter::Learned,
        Counter::DropTruncated,
        Counter::DropBadNsh,
        Counter::DropUnknownSpi,
        Counter::DropTtl,
        Counter::DropNoRoom,
        Counter::DropInner,
        Counter::ProxyMiss,
    ];

    /// Snake-case name (as in cbox.h without `CTR_`).
    pub fn name(self) -> &'static str {
        match self {
            Counter::Packets => "packets",
            Counter::Passed => "passed",
            Counter::Done => "done",
            Counter::Delivered => "delivered",
            Counter::Learned => "learned",
            Counter::DropTruncated => "drop_truncated",
            Counter::DropBadNsh => "drop_bad_nsh",
            Counter::DropUnknownSpi => "drop_unknown_spi",
            Counter::DropTtl => "drop_ttl",
            Counter::DropNoRoom => "drop_no_room",
            Counter::DropInner => "drop_inner",
            Counter::ProxyMiss => "proxy_miss",
        }
    }

    /// The counters map index of this counter of `stage`.
    pub fn index(self, stage: CounterStage) -> u32 {
        stage as u32 * CTR_PER_STAGE as u32 + self as u32
    }
}

/// One stage's counters, summed over CPUs, indexed by `Counter as usize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters(pub [u64; CTR_PER_STAGE]);

impl Counters {
    /// The value of one counter.
    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_follow_the_layouts() {
        let f = FlowKey {
            saddr: Ipv4Addr::new(10, 0, 0, 1),
            daddr: Ipv4Addr::new(10, 0, 0, 2),
            sport: 0x1234,
            dport: 80,
            proto: 6,
        };
        let b = f.to_bytes();
        assert_eq!(&b[..13], &[10, 0, 0, 1, 10, 0, 0, 2, 0x12, 0x34, 0, 80, 6]);
        assert_eq!(FlowKey::from_bytes(&b), Ok(f));
        let k = ClsKey {
            ifindex: 7,
            flow: f,
        };
        assert_eq!(ClsKey::from_bytes(&k.to_bytes()), Ok(k));
        assert_eq!(&k.to_bytes()[4..], &b[..]);
        let m = NshMeta::md1(0x123456, 9, 5, [1, 2, 3, 0xdeadbeef]);
        assert_eq!((m.spi(), m.si()), (0x123456, 9));
        assert_eq!(&m.context()[12..], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(NshMeta::from_bytes(&m.to_bytes()), Ok(m));
        let m2 = NshMeta::md2(1, 2, 3, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(m2.context(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(NshMeta::md2(1, 2, 3, &[0; 5]), Err(ContextError(5)));
        assert_eq!(NshMeta::md2(1, 2, 3, &[0; 36]), Err(ContextError(36)));
        let v = FwdVal {
            action: FwdAction::VxlanGpe,
            flags: FWDF_INGRESS,
            dmac: [1, 2, 3, 4, 5, 6],
            smac: [7, 8, 9, 10, 11, 12],
            udp_sport: 999,
            ifindex: 4,
            saddr: Ipv4Addr::new(1, 1, 1, 1),
            daddr: Ipv4Addr::new(2, 2, 2, 2),
            vni: 0xabcdef,
        };
        assert_eq!(FwdVal::from_bytes(&v.to_bytes()), Ok(v));
        assert_eq!(v.to_bytes()[20..24], [1, 1, 1, 1]);
        let c = StageCfg {
            mac: [2, 0, 0, 0, 0, 9],
            flags: CFG_ANY_DST,
            ifindex: 3,
        };
        assert_eq!(StageCfg::from_bytes(&c.to_bytes()), Ok(c));
        assert!(StageCfg::from_bytes(&[0; 11]).is_err());
        assert_eq!(Counter::DropInner.index(CounterStage::Fwd), 58);
        let slot = ClsSlot {
            live: 1,
            ent: [
                ClsVersion {
                    entry: None,
                    spill: 3,
                    hop: None,
                },
                ClsVersion {
                    entry: Some((k, m)),
                    spill: 2,
                    hop: None,
                },
            ],
        };
        let sb = slot.to_bytes();
        assert_eq!(ClsSlot::from_bytes(&sb), Ok(slot));
        assert_eq!(slot.current().spill, 2);
        assert_eq!(ClsSlot::live_sph(&sb), Some(m.sph));
        let idle = ClsSlot { live: 0, ..slot };
        assert_eq!(
            ClsSlot::live_sph(&idle.to_bytes()),
            None,
            "version 0 holds none"
        );
        assert_eq!(ClsSlot::live_sph(&sb[..40]), None);
        // A next hop cached with the MD type 1 entry: in its context's unused half, flagged in
        // `flags`, and gone from the NSH read back.
        let eth = FwdVal {
            action: FwdAction::Ethernet,
            ..v
        };
        let hop = ClsHop::of(&eth).expect("an Ethernet hop that redirects");
        let mut with = slot;
        with.ent[1].hop = Some(hop);
        let hb = with.to_bytes();
        assert_eq!(ClsSlot::from_bytes(&hb), Ok(with));
        let meta = 64 + off(&CLS_ENT_LAYOUT, "meta");
        assert_eq!(hb[meta + off(&NSH_META_LAYOUT, "flags")], 0xc0);
        let ctx = meta + off(&NSH_META_LAYOUT, "ctx");
        assert_eq!(
            &hb[ctx..ctx + 16],
            &sb[ctx..ctx + 16],
            "MD type 1's context kept"
        );
        assert_eq!(
            &hb[ctx + 16..ctx + 28],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        );
        assert_eq!(hb[ctx + 28..ctx + 32], 4u32.to_ne_bytes());
        assert_eq!(ClsHop::of(&FwdVal { ifindex: 0, ..eth }), None);
        assert_eq!(ClsHop::of(&v), None, "a VXLAN-GPE hop");
        // No room beside an MD type 2 context: such an entry caches nothing.
        let mut md2 = with;
        md2.ent[1].entry = Some((k, m2));
        assert_eq!(
            ClsSlot::from_bytes(&md2.to_bytes()).unwrap().ent[1].hop,
            None
        );
        // Version 1 starts on the second cache line; `live` is in version 0's, byte 1.
        assert_eq!(&sb[64 + 4..64 + 24], &k.to_bytes()[..]);
        assert_eq!((sb[1], sb[64], sb[64 + 1]), (1, 1, 0));
        assert!(ClsSlot::from_bytes(&sb[..127]).is_err());
        let p = ProxySlot {
            seq: 6,
            valid: 6,
            gen: 0x0102_0304_0506_0708,
            key: k.flow,
            meta: m,
        };
        let pb = p.to_bytes();
        assert_eq!(ProxySlot::from_bytes(&pb), Ok(p));
        assert_eq!(&pb[16..32], &k.flow.to_bytes()[..]);
        assert_eq!(&pb[32..72], &m.to_bytes()[..]);
        assert_eq!(p.answer(p.gen), Some((k.flow, m)));
        assert_eq!(p.answer(p.gen + 1), None, "another generation");
        assert_eq!(ProxySlot { seq: 8, ..p }.answer(p.gen), None, "invalidated");
        assert_eq!(
            ProxySlot { seq: 7, ..p }.answer(p.gen),
            None,
            "being written"
        );
        let empty = ProxySlot {
            seq: 0,
            valid: 0,
            gen: 0,
            ..p
        };
        assert_eq!(empty.answer(0), None, "never filled");
        assert!(ProxySlot::from_bytes(&pb[..71]).is_err());
    }

    #[test]
    fn proxy_slots_spread_flows() {
        let key = |s: [u8; 4], sport: u16, dport: u16| FlowKey {
            saddr: s.into(),
            daddr: [10, 0, 0, 2].into(),
            sport,
            dport,
            proto: 17,
        };
        let runs: [Box<dyn Fn(u16) -> FlowKey>; 3] = [
            Box::new(|n| key([10, 0, 0, 1], n, 80)),
            Box::new(|n| key([10, 0, 0, 1], 40000, n)),
            Box::new(|n| key([10, 0, (n >> 8) as u8, n as u8], 40000, 80)),
        ];
        for run in &runs {
            let mut seen = std::collections::BTreeSet::new();
            for n in 0..2048 {
                let s = proxy_slot(&run(n));
                assert!(s < PROXY_SLOTS);
                seen.insert(s);
            }
            // 2048 random keys would take about 8192 · (1 − e^(−1/4)) ≈ 1812 slots
            assert!(seen.len() > 1800, "{} distinct slots", seen.len());
        }
    }

    #[test]
    fn classifier_slots_spread_keys_and_separate_the_any_interface_key() {
        let key = |ifindex: u32, s: [u8; 4], d: [u8; 4], sport: u16, dport: u16| ClsKey {
            ifindex,
            flow: FlowKey {
                saddr: s.into(),
                daddr: d.into(),
                sport,
                dport,
                proto: 6,
            },
        };
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let runs: [Box<dyn Fn(u16) -> ClsKey>; 4] = [
            Box::new(|n| key(3, a, b, n, 80)),
            Box::new(|n| key(3, a, b, 40000, n)),
            Box::new(|n| key(3, [10, 0, (n >> 8) as u8, n as u8], b, 40000, 80)),
            Box::new(|n| key(3, a, [10, 0, (n >> 8) as u8, n as u8], 40000, 80)),
        ];
        let mut shared = 0;
        for run in &runs {
            let mut seen = std::collections::BTreeSet::new();
            for n in 0..1024 {
                let k = run(n);
                let s = cls_slot(&k);
                assert!(s < CLS_SLOTS);
                seen.insert(s);
                // The reply direction and the any-interface key go elsewhere (mostly).
                let r = key(
                    3,
                    k.flow.daddr.octets(),
                    k.flow.saddr.octets(),
                    k.flow.dport,
                    k.flow.sport,
                );
                shared += usize::from(s == cls_slot(&r));
                shared += usize::from(s == cls_slot(&ClsKey { ifindex: 0, ..k }));
            }
            // 1024 random keys would take about 4096 · (1 − e^(−1/4)) ≈ 906 slots
            assert!(seen.len() > 900, "{} distinct slots", seen.len());
        }
        // 8192 pairs, about 2 sharing a slot if slots were random
        assert!(
            shared <= 8,
            "{shared} keys share a slot with their reply or any-interface key"
        );
    }
}
