/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The maps of the stages. Every object that includes this file declares all of them; maps
 * are pinned by name under the instance's pin directory (libbpf's pin_root_path), so the
 * Dec, Enc, Fwd and Cls objects loaded for one service function share one proxy table,
 * one forwarding table, one configuration and one set of counters.
 */
#ifndef FUSEBOX_MAPS_H
#define FUSEBOX_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "cbox.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CLS_ENTRIES);
	__type(key, struct cls_key);
	__type(value, struct nsh_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cls_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CLS_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE); /* values from a page boundary: see cbox.h */
	__type(key, __u32);
	__type(value, struct cls_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cls_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_ENTRIES);
	__type(key, struct flow_key);
	__type(value, struct nsh_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} proxy_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROXY_SLOTS);
	__type(key, __u32);
	__type(value, struct proxy_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} proxy_slots SEC(".maps");

/* Each proxy slot's generation (cbox.h, proxy_slots): written by user space only, after each
 * of its writes to proxy_table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROXY_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} proxy_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FWD_ENTRIES);
	__type(key, __u32);
	__type(value, struct fwd_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fwd_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FWD_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE); /* values from a page boundary: see cbox.h */
	__type(key, __u32);
	__type(value, struct fwd_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fwd_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CFG_ENTRIES);
	__type(key, __u32);
	__type(value, struct stage_cfg);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CFG_SLOTS);
	__type(key, __u32);
	__type(value, struct cfg_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cfg_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAGES * CTR_PER_STAGE);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nsh_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} last_dec SEC(".maps");

/*
 * Counter `ctr` of stage `stage` on this CPU, for count_at. The fast paths look up the
 * counter they add to at their start and add to it at their end: the lookup (the key
 * through the stack, the CPU's pointer from the map's table) then overlaps the packet's own
 * loads instead of trailing them, about 1 ns here (docs/benchmarks.md).
 */
static __always_inline __u64 *counter_at(__u32 stage, __u32 ctr)
{
	__u32 idx = stage * CTR_PER_STAGE + ctr;

	return bpf_map_lookup_elem(&counters, &idx);
}

/* Adds one to a counter counter_at found. */
static __always_inline void count_at(__u64 *v)
{
	if (v)
		*v += 1;
}

/* Adds one to counter `ctr` of stage `stage`. */
static __always_inline void count(__u32 stage, __u32 ctr)
{
	count_at(counter_at(stage, ctr));
}

/* The forwarding entry of SPH `sph`, copied into `buf`: its slot's live version when that is
 * `sph`'s, else the hash's (cbox.h, fwd_slots). Returns `buf`, or NULL for an unknown (SPI,
 * SI). The copy gives both sources one type for the verifier: otherwise it would walk every
 * path after the lookup twice (a pointer into either map), and Cls+Fwd's would exceed its
 * limit. */
static __always_inline struct fwd_val *fwd_find(__u32 sph, struct fwd_val *buf)
{
	__u32 idx = FWD_SLOT(sph);
	struct fwd_slot *s = bpf_map_lookup_elem(&fwd_slots, &idx);
	struct fwd_val *h;

	if (s) {
		struct fwd_ent *e = &s->ver[s->ver[0].live & 1].ent;

		if (e->val.action && e->sph == sph) {
			__builtin_memcpy(buf, &e->val, sizeof(*buf));
			return buf;
		}
	}
	h = bpf_map_lookup_elem(&fwd_table, &sph);
	if (!h)
		return NULL;
	__builtin_memcpy(buf, h, sizeof(*buf));
	return buf;
}

/* The Ethernet next hop of `sph` when its slot holds it with version 0 live, as at rest
 * (cbox.h fwd_slots): `live` and the entry are read from the one cache line together, with
 * no load waiting on another. NULL otherwise — the slot being rewritten, another SPH's, a
 * next hop of another kind — and the caller's general code decides (fwd_find). For the
 * stages' steady-state paths. */
static __always_inline struct fwd_val *fwd_slot_eth(__u32 sph)
{
	__u32 idx = FWD_SLOT(sph);
	struct fwd_slot *s = bpf_map_lookup_elem(&fwd_slots, &idx);

	if (!s || s->ver[0].live || s->ver[0].ent.sph != sph ||
	    s->ver[0].ent.val.action != FWD_ETHERNET)
		return NULL;
	return &s->ver[0].ent.val;
}

/* The action of SPH `sph`'s forwarding entry (FWD_*), 0 for an unknown (SPI, SI): fwd_find
 * without the copy, for Enc alone, which only tells the end of the path from the rest. */
static __always_inline __u8 fwd_action(__u32 sph)
{
	__u32 idx = FWD_SLOT(sph);
	struct fwd_slot *s = bpf_map_lookup_elem(&fwd_slots, &idx);
	struct fwd_val *h;

	if (s) {
		struct fwd_ent *e = &s->ver[s->ver[0].live & 1].ent;

		if (e->val.action && e->sph == sph)
			return e->val.action;
	}
	h = bpf_map_lookup_elem(&fwd_table, &sph);
	return h ? h->action : 0;
}

/* The configuration of interface `ifindex`, copied into `buf`: its slot's live version when
 * that is `ifindex`'s, else the hash's (cbox.h, cfg_slots). Returns `buf`, or NULL when the
 * interface has none. */
static __always_inline struct stage_cfg *cfg_find(__u32 ifindex, struct stage_cfg *buf)
{
	__u32 idx = CFG_SLOT(ifindex);
	struct cfg_slot *s = bpf_map_lookup_elem(&cfg_slots, &idx);
	struct stage_cfg *h;

	if (s) {
		struct cfg_ent *e = &s->ent[s->live & 1];

		if (ifindex && e->ifindex == ifindex) {
			__builtin_memcpy(buf, &e->cfg, sizeof(*buf));
			return buf;
		}
	}
	h = bpf_map_lookup_elem(&cfg, &ifindex);
	if (!h)
		return NULL;
	__builtin_memcpy(buf, h, sizeof(*buf));
	return buf;
}

_Static_assert(CLS_SLOTS == 1 << 12, "cls_slot_of keeps the top 12 bits of the product");

/* The part of CLS_SLOT's h that does not depend on the interface (words w1..w4): the slot of
 * (ifindex, flow) is cls_slot_at(ifindex ^ this), so Cls folds a frame's 5-tuple once for
 * both of its keys. */
static __always_inline __u32 cls_flow_fold(const struct cls_key *k)
{
	const __u32 *w = (const __u32 *)k;

	return (w[1] << 12 | w[1] >> 20) ^ w[2] ^ (w[3] << 16 | w[3] >> 16) ^
	       (w[4] << 5 | w[4] >> 27);
}

/* The slot of a classifier key whose h (cbox.h, CLS_SLOT) is `h`. */
static __always_inline __u32 cls_slot_at(__u32 h)
{
	return (h * 0x9e3779b1) >> 20;
}

/* The slot of classifier key `k` in cls_slots (cbox.h, CLS_SLOT). */
static __always_inline __u32 cls_slot_of(const struct cls_key *k)
{
	return cls_slot_at(k->ifindex ^ cls_flow_fold(k));
}

/* Whether version `e` of a classifier slot holds `key`'s entry. */
static __always_inline int cls_ent_is(const struct cls_ent *e, const struct cls_key *key)
{
	const __u32 *a = (const __u32 *)&e->key, *b = (const __u32 *)key;

	return e->used &&
	       !((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]));
}

/* Version 0 of classifier slot `idx` when it is live, as at rest (cbox.h cls_slots): `live`
 * and the entry are read from the one cache line together. NULL otherwise (the slot being
 * rewritten), and the caller's general code decides. For the steady-state paths. */
static __always_inline const struct cls_ent *cls_slot_v0(__u32 idx)
{
	struct cls_slot *s = bpf_map_lookup_elem(&cls_slots, &idx);

	if (!s || s->ent[0].live)
		return NULL;
	return &s->ent[0];
}

/* The classifier entry of `key` (its flow folded: `fold`) for a frame that arrived on
 * `ifindex`, as cls_probe finds it (the interface's key, then any interface's), read in place
 * from version 0 of its slot: the steady state. NULL when cls_probe might find it elsewhere or
 * not at all (a slot being rewritten, spilled keys, no entry); the caller's general code then
 * decides. `key->ifindex` is left as the key found. */
static __always_inline const struct nsh_meta *cls_probe_v0(struct cls_key *key, __u32 ifindex,
							    __u32 fold)
{
	const struct cls_ent *e;

	key->ifindex = ifindex;
	e = cls_slot_v0(cls_slot_at(ifindex ^ fold));
	if (!e)
		return NULL;
	if (!cls_ent_is(e, key)) {
		if (e->spill)
			return NULL;
		key->ifindex = 0;
		e = cls_slot_v0(cls_slot_at(fold));
		if (!e || !cls_ent_is(e, key))
			return NULL;
	}
	return &e->meta;
}

/* The classifier entry of `key`, whose slot is `idx`, copied into `buf`: its slot's live
 * version when that is `key`'s, else the hash's when the slot has spilled keys (cbox.h,
 * cls_slots). Returns `buf`, or NULL when `key` has no entry. */
static __always_inline struct nsh_meta *cls_find_in(const struct cls_key *key, __u32 idx,
						    struct nsh_meta *buf)
{
	struct cls_slot *s = bpf_map_lookup_elem(&cls_slots, &idx);
	struct nsh_meta *h;

	if (s) {
		struct cls_ent *e = &s->ent[s->ent[0].live & 1];

		if (cls_ent_is(e, key)) {
			__builtin_memcpy(buf, &e->meta, sizeof(*buf));
			return buf;
		}
		if (!e->spill)
			return NULL;
	}
	h = bpf_map_lookup_elem(&cls_table, key);
	if (!h)
		return NULL;
	__builtin_memcpy(buf, h, sizeof(*buf));
	return buf;
}

/* The classifier entry of `key` (cls_find_in at its slot). */
static __always_inline struct nsh_meta *cls_find(const struct cls_key *key, struct nsh_meta *buf)
{
	return cls_find_in(key, cls_slot_of(key), buf);
}

_Static_assert(PROXY_SLOTS == 1 << 13, "proxy_slot_of keeps the top 13 bits of the product");

/* The slot of 5-tuple `k` in proxy_slots (cbox.h, PROXY_SLOT). */
static __always_inline __u32 proxy_slot_of(const struct flow_key *k)
{
	const __u32 *w = (const __u32 *)k;
	__u32 h = w[0] ^ (w[1] << 12 | w[1] >> 20) ^ w[2] ^ (w[3] << 21 | w[3] >> 11);

	return (h * 0x9e3779b1) >> 19;
}

/* An NSH record on the stack that meta_copy may copy: 8-byte aligned (struct nsh_meta is only
 * 4-byte aligned, and the verifier refuses misaligned stack accesses). */
#define META_ALIGNED __attribute__((aligned(8)))

/* Copies an NSH record 8 bytes at a time. Both must be 8-byte aligned: a map value (hash
 * values, array elements and proxy_slot.meta are) or META_ALIGNED on the stack. A plain
 * struct copy of a 4-byte aligned type is 32-bit loads joined in pairs. */
static __always_inline void meta_copy(struct nsh_meta *dst, const struct nsh_meta *src)
{
	__u64 *d = (__u64 *)dst;
	const __u64 *s = (const __u64 *)src;

	d[0] = s[0];
	d[1] = s[1];
	d[2] = s[2];
	d[3] = s[3];
	d[4] = s[4];
}

#define READ_ONCE_U32(x) (*(volatile __u32 *)&(x))
#define READ_ONCE_U64(x) (*(volatile __u64 *)&(x))
/* Keeps the compiler from moving memory accesses across it. */
#define compiler_barrier() asm volatile("" ::: "memory")

/* Fills slot `s` with (`key`, `m`; META_ALIGNED) read from the hash under generation `gen`, if
 * its seq is still the even `s0` read before the hash (cbox.h, proxy_slots). */
static __always_inline void proxy_fill(struct proxy_slot *s, __u32 s0, __u64 gen,
				       const struct flow_key *key, const struct nsh_meta *m)
{
	if ((s0 & 1) || s0 + 2 == 0)
		return;
	if (__sync_val_compare_and_swap(&s->seq, s0, s0 + 1) != s0)
		return;
	s->gen = gen;
	__builtin_memcpy(&s->key, key, sizeof(*key));
	meta_copy(&s->meta, m);
	s->valid = s0 + 2;
	__sync_fetch_and_add(&s->seq, 1);
}

/* The slot of `key` when it answers for `key` (cbox.h, proxy_slots): its seq is in `*seq`, and
 * the caller, once it has read the entry, checks with proxy_slot_kept that no fill came in
 * between. Otherwise NULL; then `*fill` is the slot when it caches nothing valid (a hash hit
 * fills it, with `*seq` and `*gen` as read here, before the hash), else NULL. */
static __always_inline struct proxy_slot *proxy_probe(const struct flow_key *key, __u32 *seq,
						      __u64 *gen, struct proxy_slot **fill)
{
	__u32 idx = proxy_slot_of(key);
	struct proxy_slot *s = bpf_map_lookup_elem(&proxy_slots, &idx);
	__u64 *g = bpf_map_lookup_elem(&proxy_gen, &idx);

	*fill = NULL;
	*seq = 0;
	*gen = 0;
	if (!s || !g)
		return NULL;
	*seq = READ_ONCE_U32(s->seq);
	compiler_barrier();
	*gen = READ_ONCE_U64(*g);
	if (*seq == s->valid && *seq && s->gen == *gen) {
		const __u32 *a = (const __u32 *)&s->key, *b = (const __u32 *)key;

		if (!((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])))
			return s;
		return NULL; /* another key's: left to it */
	}
	*fill = s;
	return NULL;
}

/* Whether slot `s`, which answered with seq `seq`, was not written since (what was read from it
 * in between is a copy of the hash). */
static __always_inline int proxy_slot_kept(struct proxy_slot *s, __u32 seq)
{
	compiler_barrier();
	return READ_ONCE_U32(s->seq) == seq;
}

/* The proxy entry of `key`, copied into `buf` (META_ALIGNED): from its slot of proxy_slots when the slot
 * answers for it, else from the hash proxy_table, after which a slot that caches nothing
 * valid is filled with it (a slot caching another key is left to that key). Returns `buf`, or
 * NULL when `key` has no entry. */
static __always_inline struct nsh_meta *proxy_find(const struct flow_key *key,
						   struct nsh_meta *buf)
{
	struct proxy_slot *s, *fill;
	struct nsh_meta *h;
	__u32 seq;
	__u64 gen;

	s = proxy_probe(key, &seq, &gen, &fill);
	if (s) {
		meta_copy(buf, &s->meta);
		if (proxy_slot_kept(s, seq))
			return buf;
	}
	compiler_barrier();
	h = bpf_map_lookup_elem(&proxy_table, key);
	if (!h)
		return NULL;
	meta_copy(buf, h);
	if (fill)
		proxy_fill(fill, seq, gen, key, buf);
	return buf;
}

/* Whether two NSH records are equal, 8 bytes at a time (sizeof(struct nsh_meta) = 40). */
static __always_inline int same_meta(const struct nsh_meta *a, const struct nsh_meta *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 d = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(struct nsh_meta) / 8); i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

/* Writes (`key`, `m`; META_ALIGNED) into the hash proxy_table, then invalidates the key's slot and fills it
 * with the new entry (cbox.h, proxy_slots). Returns bpf_map_update_elem's result. */
static __always_inline long proxy_store(const struct flow_key *key, const struct nsh_meta *m)
{
	__u32 idx = proxy_slot_of(key);
	struct proxy_slot *s = bpf_map_lookup_elem(&proxy_slots, &idx);
	__u64 *g = bpf_map_lookup_elem(&proxy_gen, &idx);
	__u64 gen = g ? READ_ONCE_U64(*g) : 0;
	long r;

	compiler_barrier();
	r = bpf_map_update_elem(&proxy_table, key, m, BPF_ANY);
	if (!s)
		return r;
	__u32 s0 = __sync_fetch_and_add(&s->seq, 2) + 2;

	if (!r && g)
		proxy_fill(s, s0, gen, key, m);
	return r;
}

#endif
