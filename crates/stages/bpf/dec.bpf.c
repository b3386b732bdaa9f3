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
	int bcast = 1, ours = 1;
#pragma unroll
	for (int i = 0; i < 6; i++) {
		if (dst[i] != 0xff)
			bcast = 0;
		if (dst[i] != c->mac[i])
			ours = 0;
	}
	return bcast || ours;
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

SEC("xdp")
int dec(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct nsh_loc loc;
	struct nsh_meta meta;
	struct flow_key key;

	__u32 ifindex = ctx->ingress_ifindex;
	struct stage_cfg cbuf;
	struct stage_cfg *c = cfg_find(ifindex, &cbuf);

	if (!HAS(data, data_end, 0, ETH_LEN) || !for_us(data, c)) {
		count(STAGE_DEC, CTR_PASSED);
		return XDP_PASS;
	}
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
	/* Most packets of a flow carry the NSH its entry already holds: an update (a new
	 * element swapped in) only when it differs. */
	struct nsh_meta *old = bpf_map_lookup_elem(&proxy_table, &key);
	if (!old || !same_meta(old, &meta))
		bpf_map_update_elem(&proxy_table, &key, &meta, BPF_ANY);
	__u32 zero = 0;
	struct nsh_meta *last = bpf_map_lookup_elem(&last_dec, &zero);
	if (last)
		__builtin_memcpy(last, &meta, sizeof(meta));
	if (bpf_xdp_adjust_head(ctx, (int)loc.inner) < 0) {
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

char LICENSE[] SEC("license") = "Dual BSD/GPL";
