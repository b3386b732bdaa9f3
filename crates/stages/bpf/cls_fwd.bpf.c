/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls and Fwd in one program at a chain's entry (TC ingress): a classified frame is
 * forwarded at once by (SPI, 255) like Fwd would (encfwd.h); the rest passes untouched.
 * The common case goes first (cls_fwd_fast).
 */
#include "cls.h"
#include "encfwd.h"

/* Returned by cls_fwd_fast when the frame is not its case (not a TC verdict). */
#define CLS_GENERAL 0x1003

/*
 * Cls+Fwd's steady state for a frame whose MD type 1 classifier entry cls_steady found (`m`,
 * in version 0 of its slot, read in place): for its (SPI, SI) an Ethernet next hop that
 * redirects (an ifindex), cached in the entry's own line (CLS_HOP, cbox.h cls_hop) or else in
 * its forwarding slot, the TTL not expiring. The outer Ethernet header (the
 * next hop's MACs) and the NSH (TTL - 1, as Fwd leaves it) are pushed at once and the frame
 * redirected: the frame, verdict and counters of Cls then Fwd. Otherwise it returns
 * CLS_GENERAL with nothing changed or counted, and the entry is pushed as Cls alone pushes
 * it (cls_tc_push), then fwd_run takes the frame.
 *
 * The room is made by bpf_skb_change_head, not bpf_skb_adjust_room as cls_run does (about
 * 10-15 ns less here, a third of Cls): at TC ingress the kernel pulls the MAC header's length
 * off after the program and pushes it back before a redirect, so a redirected frame leaves
 * from its new start whichever helper made the room. Only a frame left to the stack (a next
 * hop with ifindex 0: TC_ACT_OK at ingress) needs the network header moved with the room;
 * that one takes cls_tc_push.
 */
static __always_inline int cls_fwd_fast(struct __sk_buff *skb, const struct nsh_meta *m,
					__u64 *cls_done, __u64 *fwd_done)
{
	struct fwd_val *f;
	__u8 ttl = meta_ttl_next(m);

	if (!ttl)
		return CLS_GENERAL;
	if (m->flags & CLS_HOP) {
		/* The next hop the instance cached in the entry's line (cbox.h cls_hop). */
		const struct cls_hop *h = (const void *)(m->ctx + CLS_HOP_AT);

		if (!h->ifindex)
			return CLS_GENERAL;
		count_at(cls_done);
		return fwd_push_send(skb, m, ttl, NSH_MD1_LEN - NSH_BASE_LEN, h->dmac, 1,
				     h->ifindex, m->flags & CLS_HOP_INGRESS, fwd_done);
	}
	f = fwd_slot_eth(m->sph);
	if (!f || !f->ifindex)
		return CLS_GENERAL;
	count_at(cls_done);
	return fwd_push_eth(skb, m, ttl, NSH_MD1_LEN - NSH_BASE_LEN, f, fwd_done);
}

SEC("tc")
int cls_fwd(struct __sk_buff *skb)
{
	/* The steady state's two counters, looked up first (maps.h counter_at). */
	__u64 *cls_done = counter_at(STAGE_CLS, CTR_DONE);
	__u64 *fwd_done = counter_at(STAGE_FWD, CTR_DONE);
	struct cls_key key;
	const struct nsh_meta *m = cls_tc_steady(skb, &key);
	int v;

	/* Classified once: a steady-state entry whose next hop cls_fwd_fast declines is
	 * pushed as Cls alone pushes it, for fwd_run. */
	if (m) {
		v = cls_fwd_fast(skb, m, cls_done, fwd_done);
		if (v == CLS_GENERAL)
			v = cls_tc_push(skb, m, NSH_MD1_LEN - NSH_BASE_LEN);
	} else {
		v = cls_general(skb);
	}
	if (v != TC_ACT_UNSPEC)
		return v;
	return fwd_run(skb);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
