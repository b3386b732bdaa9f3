/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls at a chain's entry, written once for its two forms:
 *   - TC ingress, cls_run: cls.bpf.c (Cls alone, Fwd as the next TC filter) and cls_fwd.bpf.c
 *     (Cls and Fwd in one program, what the agents attach);
 *   - XDP, cls_xdp_run: cls_xdp.bpf.c (Cls alone; a classified frame goes up with XDP_PASS and
 *     Fwd at TC ingress forwards it).
 * Both classify the same way (cls_lookup), write the same outer Ethernet header and NSH
 * (cls_write) and count the same counters; they differ only in how the room is made.
 * The classifier table maps (ingress interface, 5-tuple) -> the NSH to push, looked up with
 * the exact interface first, then with 0 (any interface), each in its slot of cls_slots and,
 * only when that slot has spilled keys, in the hash cls_table (cbox.h, maps.h cls_find). A hit
 * gets an outer Ethernet header (zero MACs, EtherType NSH: Fwd writes the real transport) and
 * the NSH of the entry (next protocol Ethernet; TTL 0 in the entry means 63): TC returns
 * TC_ACT_UNSPEC, XDP XDP_PASS. Unmatched traffic passes untouched (TC_ACT_OK, XDP_PASS); an
 * entry of an unknown MD type or context length is dropped (TC_ACT_SHOT, XDP_DROP).
 */
#ifndef FUSEBOX_CLS_H
#define FUSEBOX_CLS_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "cbox.h"
#include "maps.h"
#include "parse.h"

/* What cls_lookup found. */
#define CLS_PASS 0 /* no entry: pass untouched (counted) */
#define CLS_HIT 1 /* push ETH_LEN + NSH_BASE_LEN + *clen bytes */
#define CLS_BAD 2 /* an entry Cls cannot push: drop (counted) */

/* The entry for (`ifindex`, `key->flow`), then (0, `key->flow`), copied into `m`
 * (META_ALIGNED) and returned, or NULL; nothing counted. */
static __always_inline struct nsh_meta *cls_probe(struct cls_key *key, __u32 ifindex,
						  struct nsh_meta *m)
{
	/* The 5-tuple folded once for both keys (maps.h cls_flow_fold). */
	__u32 fold = cls_flow_fold(key);
	key->ifindex = ifindex;
	struct nsh_meta *hit = cls_find_in(key, cls_slot_at(ifindex ^ fold), m);
	if (!hit) {
		key->ifindex = 0;
		hit = cls_find_in(key, cls_slot_at(fold), m);
	}
	return hit;
}

/* Cls's steady state: the common frame (parse_flow_fixed, into `key`) whose MD type 1 entry
 * is in version 0 of its slot (cls_probe_v0, for a frame from `ifindex`), returned in place,
 * not copied (about 8 ns less here than cls_lookup's copy). NULL for any other frame, with
 * nothing counted: the general code (cls_lookup) takes it from the start. */
static __always_inline const struct nsh_meta *cls_steady(void *data, void *data_end, __u32 ifindex,
							 struct cls_key *key)
{
	const struct nsh_meta *m;

	__builtin_memset(key, 0, sizeof(*key));
	if (parse_flow_fixed(data, data_end, &key->flow) < 0)
		return NULL;
	m = cls_probe_v0(key, ifindex, cls_flow_fold(key));
	if (!m || m->md_type != 1)
		return NULL;
	return m;
}

/* cls_probe, counting the miss and the bad entry; CLS_HIT with the context length in
 * `clen`, or what to do. A hit is counted by the caller once the NSH is written. */
static __always_inline int cls_lookup(struct cls_key *key, __u32 ifindex, struct nsh_meta *m,
				      __u32 *clen)
{
	struct nsh_meta *hit = cls_probe(key, ifindex, m);

	if (!hit) {
		count(STAGE_CLS, CTR_PASSED);
		return CLS_PASS;
	}
	__u32 n = m->md_type == 1 ? 16 : m->ctx_len;
	if ((m->md_type != 1 && m->md_type != 2) || n > NSH_MAX_CTX || (n & 3)) {
		count(STAGE_CLS, CTR_DROP_BAD_NSH);
		return CLS_BAD;
	}
	m->ctx_len = n;
	*clen = n;
	return CLS_HIT;
}

/* Writes the outer Ethernet header (zero MACs, EtherType NSH) and the NSH of `m` (context
 * length `clen`, checked by cls_lookup) at the start of the frame, whole words at a time.
 * Returns 0, or -1 (counted: no room) when the frame is shorter than what is written. */
static __always_inline int cls_write(void *data, void *data_end, const struct nsh_meta *m,
				     __u32 clen)
{
	__u8 *eth = data;

	if (m->md_type == 1) {
		/* MD type 1: one bounds check, constant offsets. */
		if (!HAS(data, data_end, 0, ETH_LEN + NSH_MD1_LEN))
			goto no_room;
		*(__u64 *)eth = 0;
		*(__u32 *)(eth + 8) = 0;
		*(__u16 *)(eth + 12) = bpf_htons(ETH_P_NSH);
		nsh_write_base(eth + ETH_LEN, m);
		const __u32 *c = (const __u32 *)m->ctx;
		__u32 *o = (__u32 *)(eth + ETH_LEN + NSH_BASE_LEN);
		o[0] = c[0];
		o[1] = c[1];
		o[2] = c[2];
		o[3] = c[3];
		return 0;
	}
	if (!HAS(data, data_end, 0, ETH_LEN + NSH_BASE_LEN))
		goto no_room;
	*(__u64 *)eth = 0;
	*(__u32 *)(eth + 8) = 0;
	*(__u16 *)(eth + 12) = bpf_htons(ETH_P_NSH);
	nsh_write_base(eth + ETH_LEN, m);
	if (nsh_write_md2_ctx(data, data_end, m, clen))
		goto no_room;
	return 0;
no_room:
	count(STAGE_CLS, CTR_DROP_NO_ROOM);
	return -1;
}

/*
 * Makes `push` bytes of room for the outer Ethernet header and the NSH at TC ingress. The
 * kernel pulls the MAC header's length off again after the program, and the bridge or the
 * stack sends or reads the frame from there: the room must be made after the MAC header
 * (bpf_skb_adjust_room keeps the MAC length and moves the network header with it) and the
 * frame's own Ethernet header copied behind the room. bpf_skb_change_head would leave the
 * network header where it was, and what leaves would be the frame as it came. adjust_room
 * takes IP frames only; the others (a tagged frame) fall back to change_head, which is right
 * at TC egress. Returns 0, or -1 (counted: no room).
 */
static __always_inline int cls_tc_room(struct __sk_buff *skb, __u32 push)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	if (!HAS(data, data_end, 0, ETH_LEN))
		goto no_room;
	/* The frame's own Ethernet header in three whole loads (a 14-byte memcpy of unknown
	 * alignment is 14 byte loads and stores for the BPF target). */
	__u64 own0 = *(const __u64 *)data;
	__u32 own1 = *(const __u32 *)(data + 8);
	__u16 own2 = *(const __u16 *)(data + 12);
	if (bpf_skb_adjust_room(skb, push, BPF_ADJ_ROOM_MAC, 0) == 0) {
		/* The frame's own Ethernet header right behind the room, written through
		 * direct packet access (no helper call). */
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		__u8 *in = (__u8 *)data + push;
		if ((void *)(in + ETH_LEN) > data_end)
			goto no_room;
		*(__u64 *)in = own0;
		*(__u32 *)(in + 8) = own1;
		*(__u16 *)(in + 12) = own2;
		return 0;
	}
	if (bpf_skb_change_head(skb, push, 0) == 0)
		return 0;
no_room:
	count(STAGE_CLS, CTR_DROP_NO_ROOM);
	return -1;
}

/* Cls at TC ingress for an entry `m` (validated, `clen` context bytes): the room, the outer
 * Ethernet header and the NSH, counted; TC_ACT_UNSPEC lets Fwd, the next filter, run. */
static __always_inline int cls_tc_push(struct __sk_buff *skb, const struct nsh_meta *m, __u32 clen)
{
	if (cls_tc_room(skb, ETH_LEN + NSH_BASE_LEN + clen))
		return TC_ACT_SHOT;
	if (cls_write((void *)(long)skb->data, (void *)(long)skb->data_end, m, clen) < 0)
		return TC_ACT_SHOT;
	count(STAGE_CLS, CTR_DONE);
	return TC_ACT_UNSPEC;
}

/* Cls at TC ingress for a frame cls_steady declined: any frame, any entry (copied). */
static __always_inline int cls_general(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct cls_key key;
	struct nsh_meta m META_ALIGNED;
	__u32 clen = 0;

	__builtin_memset(&key, 0, sizeof(key));
	if (parse_flow_at0(data, data_end, &key.flow) < 0) {
		/* Headers may lie beyond the linear part: pull them and try once more. */
		if (bpf_skb_pull_data(skb, skb->len < 128 ? skb->len : 128) < 0)
			goto pass;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		if (parse_flow(data, data_end, 0, &key.flow) < 0)
			goto pass;
	}
	/* At TC ingress, skb->ifindex is the interface the frame arrived on. */
	int r = cls_lookup(&key, skb->ifindex, &m, &clen);
	if (r == CLS_PASS)
		return TC_ACT_OK;
	if (r != CLS_HIT)
		return TC_ACT_SHOT;
	return cls_tc_push(skb, &m, clen);
pass:
	count(STAGE_CLS, CTR_PASSED);
	return TC_ACT_OK;
}

/* The entry cls_steady finds for the frame of `skb` at TC ingress, or NULL. */
static __always_inline const struct nsh_meta *cls_tc_steady(struct __sk_buff *skb,
							    struct cls_key *key)
{
	return cls_steady((void *)(long)skb->data, (void *)(long)skb->data_end, skb->ifindex,
			  key);
}

/* Cls at TC ingress: the steady state (cls_steady), else the general code. */
static __always_inline int cls_run(struct __sk_buff *skb)
{
	struct cls_key key;
	const struct nsh_meta *hit = cls_tc_steady(skb, &key);

	if (hit)
		return cls_tc_push(skb, hit, NSH_MD1_LEN - NSH_BASE_LEN);
	return cls_general(skb);
}

/* Cls at XDP for an entry `m` (validated, `clen` context bytes): the room, the outer
 * Ethernet header and the NSH, counted; the frame goes up. */
static __always_inline int cls_xdp_push(struct xdp_md *ctx, const struct nsh_meta *m, __u32 clen)
{
	if (bpf_xdp_adjust_head(ctx, -(int)(ETH_LEN + NSH_BASE_LEN + clen)) < 0) {
		count(STAGE_CLS, CTR_DROP_NO_ROOM);
		return XDP_DROP;
	}
	if (cls_write((void *)(long)ctx->data, (void *)(long)ctx->data_end, m, clen) < 0)
		return XDP_DROP;
	count(STAGE_CLS, CTR_DONE);
	return XDP_PASS;
}

/*
 * Cls at XDP: the same classification and the same frame out. bpf_xdp_adjust_head grows the
 * frame at its start (the frame's own Ethernet header stays where it is, right behind the
 * room), which at XDP is all it takes: the stack has not seen the frame yet and reads it
 * from the new start. A classified frame goes up with XDP_PASS as an NSH frame (Fwd, at TC
 * ingress, forwards it). The frame is linear here (no multi-buffer: the program is not
 * loaded with BPF_F_XDP_HAS_FRAGS), so there is no second parse after a pull.
 */
static __always_inline int cls_xdp_run(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct cls_key key;
	struct nsh_meta m META_ALIGNED;
	const struct nsh_meta *hit;
	__u32 clen = 0;

	hit = cls_steady(data, data_end, ctx->ingress_ifindex, &key);
	if (hit)
		return cls_xdp_push(ctx, hit, NSH_MD1_LEN - NSH_BASE_LEN);
	__builtin_memset(&key, 0, sizeof(key));
	if (parse_flow_at0(data, data_end, &key.flow) < 0) {
		count(STAGE_CLS, CTR_PASSED);
		return XDP_PASS;
	}
	int r = cls_lookup(&key, ctx->ingress_ifindex, &m, &clen);
	if (r == CLS_PASS)
		return XDP_PASS;
	if (r != CLS_HIT)
		return XDP_DROP;
	return cls_xdp_push(ctx, &m, clen);
}

#endif
