/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls (TC ingress) at a chain's entry, written once for cls.bpf.c (Cls alone, Fwd as the
 * next TC filter) and cls_fwd.bpf.c (Cls and Fwd in one program, what the agents attach):
 * the classifier table maps (ingress interface, 5-tuple) -> the NSH to push, looked up with
 * the exact interface first, then with 0 (any interface), each in its slot of cls_slots and,
 * only when that slot has spilled keys, in the hash cls_table (cbox.h, maps.h cls_find). A hit gets an outer Ethernet
 * header (zero MACs, EtherType NSH: Fwd writes the real transport) and the NSH of the entry
 * (next protocol Ethernet; TTL 0 in the entry means 63), and cls_run returns TC_ACT_UNSPEC.
 * Unmatched traffic passes untouched (TC_ACT_OK).
 */
#ifndef FUSEBOX_CLS_H
#define FUSEBOX_CLS_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "cbox.h"
#include "maps.h"
#include "parse.h"

static __always_inline int cls_run(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct cls_key key;
	struct nsh_meta m;

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
	key.ifindex = skb->ifindex;
	struct nsh_meta *hit = cls_find(&key, &m);
	if (!hit) {
		key.ifindex = 0;
		hit = cls_find(&key, &m);
	}
	if (!hit)
		goto pass;
	__u32 clen = m.md_type == 1 ? 16 : m.ctx_len;
	if ((m.md_type != 1 && m.md_type != 2) || clen > NSH_MAX_CTX || (clen & 3)) {
		count(STAGE_CLS, CTR_DROP_BAD_NSH);
		return TC_ACT_SHOT;
	}
	__u32 push = ETH_LEN + NSH_BASE_LEN + clen;
	/*
	 * At TC ingress the kernel pulls the MAC header's length off again after the program,
	 * and the bridge or the stack sends or reads the frame from there: the room must be
	 * made after the MAC header (bpf_skb_adjust_room keeps the MAC length and moves the
	 * network header with it) and the frame's own Ethernet header copied behind the room.
	 * bpf_skb_change_head would leave the network header where it was, and what leaves
	 * would be the frame as it came. adjust_room takes IP frames only; the others (a
	 * tagged frame) fall back to change_head, which is right at TC egress.
	 */
	__u8 own[ETH_LEN];
	if (!HAS(data, data_end, 0, ETH_LEN)) {
		count(STAGE_CLS, CTR_DROP_NO_ROOM);
		return TC_ACT_SHOT;
	}
	__builtin_memcpy(own, data, ETH_LEN);
	if (bpf_skb_adjust_room(skb, push, BPF_ADJ_ROOM_MAC, 0) == 0) {
		/* The frame's own Ethernet header right behind the room, written through
		 * direct packet access (no helper call). */
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		__u8 *in = (__u8 *)data + push;
		if ((void *)(in + ETH_LEN) > data_end) {
			count(STAGE_CLS, CTR_DROP_NO_ROOM);
			return TC_ACT_SHOT;
		}
		__builtin_memcpy(in, own, ETH_LEN);
	} else if (bpf_skb_change_head(skb, push, 0) < 0) {
		count(STAGE_CLS, CTR_DROP_NO_ROOM);
		return TC_ACT_SHOT;
	}
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (!HAS(data, data_end, 0, ETH_LEN + NSH_BASE_LEN)) {
		count(STAGE_CLS, CTR_DROP_NO_ROOM);
		return TC_ACT_SHOT;
	}
	__u8 *eth = data;
	__builtin_memset(eth, 0, 12);
	eth[12] = ETH_P_NSH >> 8;
	eth[13] = ETH_P_NSH & 0xff;
	m.ctx_len = clen;
	nsh_write_base(data + ETH_LEN, &m);
#pragma unroll
	for (int i = 0; i < NSH_MAX_CTX / 4; i++) {
		if ((__u32)i * 4 >= clen)
			break;
		__u8 *w = (__u8 *)data + ETH_LEN + NSH_BASE_LEN + i * 4;
		asm volatile("" : "+r"(w)); /* a fresh, bounds-checked pointer per word */
		if ((void *)(w + 4) > data_end) {
			count(STAGE_CLS, CTR_DROP_NO_ROOM);
			return TC_ACT_SHOT;
		}
		__builtin_memcpy(w, &m.ctx[i * 4], 4);
	}
	count(STAGE_CLS, CTR_DONE);
	return TC_ACT_UNSPEC;
pass:
	count(STAGE_CLS, CTR_PASSED);
	return TC_ACT_OK;
}

#endif
