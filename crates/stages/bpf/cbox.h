/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The contract between FuseBox's NSH stages (Cls, Dec, Enc, Fwd, Enc+Fwd) and user space:
 * map layouts, counter indices, flags. crates/stages/src/maps.rs mirrors every struct byte
 * for byte (its tests check the sizes and offsets against this file); change both together.
 *
 * Byte order: addresses and ports in `struct flow_key` and the VXLAN-GPE addresses are in
 * network order (as on the wire); every other integer is in host order.
 *
 * Packets on the wire between service functions (RFC 8300, Chaining-Box §5.1):
 *   Ethernet transport:  outer Ethernet (EtherType 0x894F) | NSH | inner Ethernet frame
 *   VXLAN-GPE transport: outer Ethernet | IPv4 | UDP (dst 4790) | VXLAN-GPE (P bit, next
 *                        protocol 4 = NSH) | NSH | inner Ethernet frame
 * The NSH's next protocol is 3 (Ethernet): the SF sees exactly the frame the classifier saw.
 */
#ifndef FUSEBOX_CBOX_H
#define FUSEBOX_CBOX_H

#include <linux/types.h>

/* The inner 5-tuple: the proxy table's key (Dec writes, Enc reads), and the classifier's. */
struct flow_key {
	__u32 saddr; /* network order */
	__u32 daddr; /* network order */
	__u16 sport; /* network order; 0 for protocols without ports */
	__u16 dport; /* network order */
	__u8 proto;
	__u8 pad[3]; /* zero */
}; /* 16 bytes */

/* Classifier key: the ingress interface (0 = any interface) and the 5-tuple. Cls looks up
 * (ifindex, flow) first, then (0, flow). */
struct cls_key {
	__u32 ifindex;
	struct flow_key flow;
}; /* 20 bytes */

/* Most context bytes carried: MD type 1 always has 16; MD type 2 up to 32 (TLVs, whole
 * 4-byte words). */
#define NSH_MAX_CTX 32

/* An NSH without its base-header constants: what Cls pushes, what Dec saves for Enc. */
struct nsh_meta {
	__u32 sph; /* SPI << 8 | SI */
	__u8 md_type; /* 1 or 2 */
	__u8 ttl; /* 6 bits; Cls: 0 means 63 */
	__u8 ctx_len; /* bytes of context: 16 for MD type 1; 0..32, a multiple of 4, for MD type 2 */
	__u8 flags; /* PROXY_* */
	__u8 ctx[NSH_MAX_CTX];
}; /* 40 bytes */

/*
 * The classifier's fast part, `cls_slots`: an array of CLS_SLOTS slots, the slot of a key being
 * CLS_SLOT(key), a hash of its five 32-bit words w0..w4 (ifindex, saddr, daddr, the ports, the
 * protocol and pad; each as loaded in host order):
 *   h = w0 ^ rotl(w1, 12) ^ w2 ^ rotl(w3, 16) ^ rotl(w4, 5);
 *   slot = (h * 0x9e3779b1 mod 2^32) >> 20   (the top 12 bits: CLS_SLOTS is 4096)
 * (one multiplication: a full mixer measured 3-4 ns more per lookup; the rotations were chosen
 * so that runs of ports and addresses spread and a flow's two directions and its
 * any-interface key get other slots; maps.h cls_slot_of, crates/stages/src/maps.rs cls_slot). A slot holds two versions and
 * `live`, written like fwd_slots' (the version packets do not read, then the flip). The live
 * version is `key`'s entry when `used` is 1 and its key is `key`. A key whose slot holds another
 * key lives in the hash `cls_table`; `spill` (in the live version) counts the keys of the slot
 * that are there, so a key found in neither costs no hash lookup unless the slot has spilled
 * keys (Cls looks up two keys for a frame that misses the exact one). A key is never in both at
 * rest.
 *
 * As in fwd_slots, each version is a cache line of its own, `live` in the first (the array is
 * BPF_F_MMAPABLE), and user space leaves version 0 live at rest (Instance::insert_cls): a
 * packet reads one line, where the 132-byte slot of before, at a 136-byte stride, straddled
 * two or three.
 */
struct cls_ent {
	__u8 used; /* 1: key and meta hold an entry */
	__u8 live; /* in ent[0] only: 0 or 1, the version packets read */
	__u16 spill; /* keys of this slot in the hash cls_table */
	struct cls_key key;
	struct nsh_meta meta;
}; /* 64 bytes */

struct cls_slot {
	struct cls_ent ent[2];
}; /* 128 bytes */

/*
 * The next hop, cached in a classifier slot's MD type 1 entry for Cls+Fwd: the instance writes
 * the Ethernet next hop that redirects (FWD_ETHERNET with an ifindex) of the entry's (SPI, SI)
 * into the 16 context bytes MD type 1 leaves unused (ctx[16..32]) and sets CLS_HOP in the
 * entry's `flags` (and CLS_HOP_INGRESS for FWDF_INGRESS). Cls+Fwd then reads the entry and its
 * next hop from the one cache line, instead of the forwarding slot the entry's SPH names: a
 * load that waited for the entry's (docs/benchmarks.md). The instance rewrites the entries of
 * an SPH, through the slot's versions, whenever that SPH's forwarding entry changes, before
 * insert_fwd or delete_fwd returns; an entry without CLS_HOP takes the forwarding slot as
 * before. Cls, Cls at XDP and the general code never read these bytes.
 */
struct cls_hop {
	__u8 dmac[6];
	__u8 smac[6];
	__u32 ifindex;
}; /* 16 bytes, at meta.ctx + 16 */

#define CLS_HOP 0x40 /* nsh_meta.flags of a classifier entry: ctx[16..32] holds a cls_hop */
#define CLS_HOP_INGRESS 0x80 /* and its redirect is to the interface's ingress */
#define CLS_HOP_AT 16

#define CLS_SLOTS 4096

/*
 * The proxy table's cache, `proxy_slots`: an array of PROXY_SLOTS slots in front of the hash
 * `proxy_table`, which stays the only truth (user space lists and writes the hash; the slot is
 * only ever a copy of it). The slot of a 5-tuple is PROXY_SLOT(key), from its four 32-bit
 * words w0..w3 (saddr, daddr, the ports, the protocol and pad; each as loaded in host order):
 *   h = w0 ^ rotl(w1, 12) ^ w2 ^ rotl(w3, 21);
 *   slot = (h * 0x9e3779b1 mod 2^32) >> 19   (the top 13 bits: PROXY_SLOTS is 8192)
 * (maps.h proxy_slot_of, crates/stages/src/maps.rs proxy_slot). Unlike the other slot arrays,
 * it is written by the stages themselves on several CPUs at once (Dec on every new NSH, Enc
 * when it learns), so its protocol is a sequence counter, `seq`, changed by atomic operations
 * only:
 *   - a stage that wrote or deleted a key in the hash adds 2 to the seq of the key's slot
 *     (invalidation: the parity stays, the value moves on);
 *   - a stage fills a slot with (key, value) only if seq is the even s0 it read before it read
 *     the hash value (or, for its own write, right after its invalidation): it swaps s0 for
 *     s0 + 1 (compare and swap; a failure means another writer came in between, and it gives
 *     up), writes gen, key and meta, sets valid = s0 + 2 and adds 1 to seq;
 *   - a slot answers for `key` when seq (read first) equals valid, gen equals the slot's
 *     current generation in `proxy_gen`, its key is `key`, and seq reads the same after the
 *     value was copied; anything else is a miss, and the hash is looked up.
 * An invalidation that comes while a fill holds the slot leaves seq at s0 + 4 (or more) after
 * the fill, so the value it wrote, which may predate that hash write, never answers.
 * User space cannot take part in atomic operations on a map value: it writes the hash, then
 * a new, never-used value into the slot's `proxy_gen` element (its own array, written by user
 * space only; crates/stages/src/load.rs). A value filled under an older generation does not
 * answer; a fill reads the generation before the hash, so one that saw the new generation
 * read the hash after user space's write. Readers rely on loads not passing loads and stores
 * not passing stores (x86-64, where the stages run; clang 14 has no BPF load-acquire). A key
 * whose slot caches another key is looked up in the hash: a collision only costs the lookup.
 */
struct proxy_slot {
	__u32 seq; /* odd: a fill is writing the slot */
	__u32 valid; /* the seq at which the copy below is the hash's; 0: never filled */
	__u64 gen; /* proxy_gen of this slot when the copy was made */
	struct flow_key key;
	struct nsh_meta meta;
}; /* 72 bytes */

#define PROXY_SLOTS 8192

/* nsh_meta.flags in the proxy table. */
#define PROXY_LEARNED 0x1 /* Enc learned this key from an SF's translated packet (NAT-aware) */
#define PROXY_STATIC 0x2 /* written by the controller (direct-link corner cases, §5.5) */
#define PROXY_TOLD 0x4 /* told by a FuseBox SF, which knows its own rewrites (fusebox run --tell-proxy) */

/* The forwarding table: key SPH (SPI << 8 | SI) -> next hop. */
struct fwd_val {
	__u8 action; /* FWD_* */
	__u8 flags; /* FWDF_* */
	__u8 dmac[6]; /* next hop's MAC (outer Ethernet destination) */
	__u8 smac[6]; /* our MAC on the egress interface (outer Ethernet source) */
	__u16 udp_sport; /* VXLAN-GPE: UDP source port, 0 = derived from the inner flow */
	__u32 ifindex; /* redirect to this interface; 0 = continue on the current one */
	__u32 saddr; /* VXLAN-GPE: outer IPv4 source, network order */
	__u32 daddr; /* VXLAN-GPE: outer IPv4 destination (tunnel endpoint), network order */
	__u32 vni; /* VXLAN-GPE: 24-bit VNI */
}; /* 32 bytes */

/*
 * The forwarding table's fast part, `fwd_slots`: an array of FWD_SLOTS slots, the slot of an
 * SPH being FWD_SLOT(sph) = (SPI mod 64) * 64 + (255 - SI) mod 64, so the first 64 hops of
 * 64 paths whose SPIs differ mod 64 have a slot each. An array lookup is a bounds check and an
 * address the verifier inlines; a hash lookup hashes the key and walks a bucket (about 13 ns
 * here, one stage's whole budget). A slot holds two versions of an entry and which one is
 * live: user space writes the version not live, then flips `live` in a second write, so a
 * packet never sees a half-written entry (an array value is copied in place, not swapped
 * like a hash element). The live version is the entry of `sph` when its action is not 0;
 * an SPH whose slot holds another SPH (two SPHs sharing a slot) lives in `fwd_table`, the
 * hash, where a stage looks next. An SPH is never in both at rest.
 *
 * Each version is a cache line of its own, `live` in the first (the array is
 * BPF_F_MMAPABLE, so its values start on a page and a 128-byte slot on a line), and user
 * space leaves version 0 live at rest (Instance::insert_fwd): a packet reads one line, where
 * a 76-byte slot at the array's 8-byte stride straddled two (Fwd's lookup went from about
 * 9 to 5 ns here).
 */
struct fwd_ent {
	__u32 sph; /* the SPH this version is the entry of */
	struct fwd_val val; /* action 0: empty */
}; /* 36 bytes */

/* One version of a slot: a cache line. */
struct fwd_ver {
	__u8 live; /* in ver[0] only: 0 or 1, the version packets read */
	__u8 pad[3];
	struct fwd_ent ent;
	__u8 tail[24];
}; /* 64 bytes */

struct fwd_slot {
	struct fwd_ver ver[2];
}; /* 128 bytes */

#define FWD_SLOTS 4096
#define FWD_SLOT(sph) ((((sph) >> 2) & 0xfc0) | (~(sph) & 0x3f))

#define FWD_ETHERNET 1 /* next hop over Ethernet transport */
#define FWD_VXLAN_GPE 2 /* next hop over a VXLAN-GPE tunnel */
#define FWD_END 3 /* end of path: remove transport and NSH, deliver the inner frame */

#define FWDF_INGRESS 0x1 /* redirect to the interface's ingress (bpf_redirect BPF_F_INGRESS) */

/* The configuration map, keyed by ifindex (one SF instance's Dec and Enc may sit on two
 * interfaces): who we are on that interface. */
struct stage_cfg {
	__u8 mac[6]; /* this interface's MAC: Dec takes frames for it (and broadcast) */
	__u16 flags; /* CFG_* */
	__u32 ifindex;
}; /* 12 bytes */

/* The configuration's fast part, `cfg_slots`: an array of CFG_SLOTS slots, the slot of an
 * interface being CFG_SLOT(ifindex) = ifindex mod 256, with the two versions and the `live`
 * flip of fwd_slots (above). The live version is `ifindex`'s entry when its `ifindex` is
 * (0: empty); an interface whose slot holds another stays in the hash `cfg`, looked up next. */
struct cfg_ent {
	__u32 ifindex; /* the interface this version is the entry of; 0: empty */
	struct stage_cfg cfg;
}; /* 16 bytes */

struct cfg_slot {
	__u8 live; /* 0 or 1: the version packets read */
	__u8 pad[3];
	struct cfg_ent ent[2];
}; /* 36 bytes */

#define CFG_SLOTS 256
#define CFG_SLOT(ifindex) ((ifindex) & 0xff)

#define CFG_ANY_DST 0x1 /* Dec: take NSH frames whatever their destination MAC */
#define CFG_NAT_LEARN 0x2 /* Enc: on a proxy miss, learn the SF's translated 5-tuple from last_dec */
#define CFG_TO_HOST 0x4 /* Dec: write this interface's MAC into the decapsulated frame's
			 * destination, so a kernel SF (a Linux router) takes the frame as
			 * its own; the SF rewrites the MACs when it forwards anyway */

/* last_dec: a per-CPU array of one struct nsh_meta, written by Dec on every decapsulation
 * (md_type 0 = nothing yet). A kernel SF (forwarding, iptables NAT) handles a frame from
 * XDP to TC egress in one softirq run on one CPU, so on a proxy miss Enc in NAT-aware mode
 * takes this CPU's last Dec as the packet's NSH and learns the translated 5-tuple. */

/* Counters: a per-CPU array indexed STAGE * CTR_PER_STAGE + CTR_*; user space sums the CPUs.
 * A packet costs one increment: the stages count each packet's outcome (CTR_PASSED ..
 * CTR_PROXY_MISS, every one but CTR_LEARNED, exactly one per packet and stage), and user
 * space derives CTR_PACKETS as their sum; its slot stays zero. */
#define STAGE_CLS 0
#define STAGE_DEC 1
#define STAGE_ENC 2
#define STAGE_FWD 3
#define STAGES 4
#define CTR_PER_STAGE 16

#define CTR_PACKETS 0 /* every packet the stage saw: the sum of the outcomes, made by user space */
#define CTR_PASSED 1 /* not the stage's traffic: left untouched */
#define CTR_DONE 2 /* classified / decapsulated / encapsulated / forwarded */
#define CTR_DELIVERED 3 /* end of path: decapsulated and delivered */
#define CTR_LEARNED 4 /* Enc: proxy entries learned (NAT-aware) */
#define CTR_DROP_TRUNCATED 5 /* headers shorter than they say */
#define CTR_DROP_BAD_NSH 6 /* version, length or MD type not supported */
#define CTR_DROP_UNKNOWN_SPI 7 /* no forwarding entry for (SPI, SI) */
#define CTR_DROP_TTL 8 /* NSH TTL expired */
#define CTR_DROP_NO_ROOM 9 /* the kernel refused to grow or shrink the packet */
#define CTR_DROP_INNER 10 /* inner frame is not Ethernet + IPv4 */
#define CTR_PROXY_MISS 11 /* Enc: no proxy entry for the 5-tuple (passed untouched) */

/* Map sizes. */
#define CLS_ENTRIES 4096
#define PROXY_ENTRIES 65536
#define FWD_ENTRIES 4096
#define CFG_ENTRIES 64

#endif
