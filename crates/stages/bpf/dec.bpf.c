/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dec (XDP), before an NSH-unaware service function (Chaining-Box §5.2.1): an NSH frame for
 * this interface loses its transport and NSH; the NSH (SPH, MD type, TTL, context) is kept in
 * the proxy table under the inner 5-tuple, where Enc finds it again, and in this CPU's
 * last_dec slot (NAT-aware Enc). Frames without NSH pass untouched. With CFG_TO_HOST the
 * decapsulated frame's destination MAC becomes the interface's.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "cbox.h"
#include "maps.h"
#include "parse.h"

/* Whether the frame's destination MAC is this interface's (or broadcast), by the cfg entry
 * `c` of the ingress interface: no entry, or CFG_ANY_DST, takes every destination. */
static __always_inline int for_us(__u8 *dst, struct stage_cfg *c)
{
	if (!c || (c->flags & CFG_ANY_DST))
		return 1;
	/* (Word loads here made clang 14 spill an unset register on the general path, which the
	 * verifier refuses.) */
	__u8 diff = 0, all = 0xff;
#pragma unroll
	for (int i = 0; i < 6; i++) {
		diff |= dst[i] ^ c->mac[i];
		all &= dst[i];
	}
	return all == 0xff || diff == 0;
}

/* The common frame, read at fixed offsets after one bounds check: Ethernet transport without
 * a VLAN tag, an MD type 1 NSH (next protocol Ethernet), an inner Ethernet frame without a tag
 * carrying IPv4 without options. */
#define FAST_INNER (ETH_LEN + NSH_MD1_LEN) /* 38: the inner frame */
#define FAST_LEN (FAST_INNER + ETH_LEN + 20 + 4) /* 76: up to the inner ports */

/*
 * The common frame's parse: for the common frame (above), the 5-tuple and the NSH exactly as
 * find_nsh, parse_flow and nsh_read_meta would give them, and 1; 0 for any other frame (the
 * general parse decides). One bounds check and constant offsets instead of a walk with a
 * check per header.
 */
static __always_inline int dec_parse_fixed(void *data, void *data_end, struct flow_key *k,
					   struct nsh_meta *m)
{
	__u8 *p = data;

	if (!HAS(data, data_end, 0, FAST_LEN))
		return 0;
	__u8 *n = p + ETH_LEN, *e = p + FAST_INNER, *ip = e + ETH_LEN;

	/* EtherTypes in one 16-bit load each; the NSH's first word (version, length in words,
	 * MD type, next protocol) in one masked 32-bit compare */
	if (*(const __u16 *)(p + 12) != bpf_htons(ETH_P_NSH) ||
	    (*(const __u32 *)n & bpf_htonl(0xc03f0fff)) !=
		    bpf_htonl((NSH_MD1_LEN / 4) << 16 | 1 << 8 | NSH_NP_ETHERNET) ||
	    *(const __u16 *)(e + 12) != bpf_htons(ETH_P_IP) || ip[0] != 0x45)
		return 0;
	flow_ipv4_fixed(ip, k);
	__builtin_memset(m, 0, sizeof(*m));
	m->sph = bpf_ntohl(*(const __u32 *)(n + 4));
	m->md_type = 1;
	m->ttl = ((n[0] & 0x0f) << 2) | (n[1] >> 6);
	m->ctx_len = NSH_MD1_LEN - NSH_BASE_LEN;
	/* the context in four 32-bit loads (a memcpy would be byte loads for the BPF target) */
	__u32 *c = (__u32 *)m->ctx;
	const __u32 *w = (const __u32 *)(n + NSH_BASE_LEN);
	c[0] = w[0];
	c[1] = w[1];
	c[2] = w[2];
	c[3] = w[3];
	return 1;
}

/* Returned by dec_fast when the frame is not its case (not an XDP verdict). */
#define DEC_GENERAL 0x1000

/*
 * Dec's steady state, tried before the general code: the interface's configuration in its
 * slot, the common frame (dec_parse_fixed), for this interface (its MAC, broadcast, or
 * CFG_ANY_DST), and a proxy entry already holding this NSH for the 5-tuple (every packet of a
 * flow after its first). Does what the general code does for it — last_dec, the headers
 * removed (or the no-room drop), CFG_TO_HOST, the counter — and returns its verdict; any
 * other frame gets DEC_GENERAL with nothing counted or changed but the proxy slot's cache
 * (proxy_find may fill it), and the general code takes it from the start, so a frame gets
 * the same verdict, frame, entries and counters either way.
 *
 * Why apart: in one function with the general code (VXLAN-GPE, VLAN tags, MD type 2, the
 * configuration in the hash, stores), clang kept values for the general paths in registers
 * and stack slots set on every branch; on its own this path takes about a seventh less time
 * (docs/benchmarks.md). Its destination check reads whole words, which in the general code
 * made clang 14 spill an unset register (for_us).
 */
static __always_inline int dec_fast(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct nsh_meta meta META_ALIGNED, obuf META_ALIGNED;
	struct flow_key key;
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 idx = CFG_SLOT(ifindex), zero = 0;
	struct cfg_slot *cs = bpf_map_lookup_elem(&cfg_slots, &idx);
	struct nsh_meta *old, *last;
	struct cfg_ent *ce;
	__u8 *p = data;
	__u16 flags;

	if (!cs)
		return DEC_GENERAL;
	ce = &cs->ent[cs->live & 1];
	if (!ifindex || ce->ifindex != ifindex)
		return DEC_GENERAL;
	if (!dec_parse_fixed(data, data_end, &key, &meta))
		return DEC_GENERAL;
	flags = ce->cfg.flags;
	if (!(flags & CFG_ANY_DST)) {
		/* the destination MAC (the frame holds FAST_LEN bytes) against ours, then
		 * broadcast; the MAC in the slot is 4-byte aligned (cbox.h cfg_ent) */
		__u32 d0 = *(const __u32 *)p;
		__u16 d1 = *(const __u16 *)(p + 4);

		if ((d0 != *(const __u32 *)ce->cfg.mac || d1 != *(const __u16 *)(ce->cfg.mac + 4)) &&
		    (d0 != 0xffffffff || d1 != 0xffff))
			return DEC_GENERAL;
	}
	old = proxy_find(&key, &obuf);
	if (!old || !same_meta(old, &meta))
		return DEC_GENERAL;
	last = bpf_map_lookup_elem(&last_dec, &zero);
	if (last)
		meta_copy(last, &meta);
	if (bpf_xdp_adjust_head(ctx, FAST_INNER) < 0) {
		count(STAGE_DEC, CTR_DROP_NO_ROOM);
		return XDP_DROP;
	}
	if (flags & CFG_TO_HOST) {
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (HAS(data, data_end, 0, ETH_LEN))
			mac_copy(data, ce->cfg.mac);
	}
	count(STAGE_DEC, CTR_DONE);
	return XDP_PASS;
}

/* Dec's general code: any transport, MD type, configuration; the first packet of a flow. */
static __always_inline int dec_general(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct nsh_loc loc;
	struct nsh_meta meta META_ALIGNED;
	struct flow_key key;

	__u32 ifindex = ctx->ingress_ifindex;
	struct stage_cfg cbuf;
	struct stage_cfg *c = cfg_find(ifindex, &cbuf);

	if (!HAS(data, data_end, 0, ETH_LEN) || !for_us(data, c)) {
		count(STAGE_DEC, CTR_PASSED);
		return XDP_PASS;
	}
	__u32 inner = FAST_INNER;

	if (!dec_parse_fixed(data, data_end, &key, &meta)) {
		int r = find_nsh(data, data_end, &loc);

		if (r < 0) {
			count(STAGE_DEC, CTR_PASSED);
			return XDP_PASS;
		}
		if (r > 0) {
			count(STAGE_DEC, r);
			return XDP_DROP;
		}
		if (loc.next_proto != NSH_NP_ETHERNET ||
		    parse_flow(data, data_end, loc.inner, &key) < 0) {
			count(STAGE_DEC, CTR_DROP_INNER);
			return XDP_DROP;
		}
		if (nsh_read_meta(data, data_end, &loc, &meta) < 0) {
			count(STAGE_DEC, CTR_DROP_TRUNCATED);
			return XDP_DROP;
		}
		inner = loc.inner;
	}
	/* Most packets of a flow carry the NSH its entry already holds: an update (a new
	 * element swapped in) only when it differs. The entry is read through its slot
	 * (maps.h proxy_find), and written to the hash and the slot (proxy_store). (Comparing
	 * in the slot without the copy measured slower.) */
	struct nsh_meta obuf META_ALIGNED;
	struct nsh_meta *old = proxy_find(&key, &obuf);
	if (!old || !same_meta(old, &meta))
		proxy_store(&key, &meta);
	__u32 zero = 0;
	struct nsh_meta *last = bpf_map_lookup_elem(&last_dec, &zero);
	if (last)
		meta_copy(last, &meta);
	if (bpf_xdp_adjust_head(ctx, (int)inner) < 0) {
		count(STAGE_DEC, CTR_DROP_NO_ROOM);
		return XDP_DROP;
	}
	if (c && (c->flags & CFG_TO_HOST)) {
		/* A kernel SF (a Linux router) takes the frame as its own. */
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (HAS(data, data_end, 0, ETH_LEN))
			__builtin_memcpy(data, c->mac, 6);
	}
	count(STAGE_DEC, CTR_DONE);
	return XDP_PASS;
}

SEC("xdp")
int dec(struct xdp_md *ctx)
{
	int r = dec_fast(ctx);

	if (r != DEC_GENERAL)
		return r;
	return dec_general(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
