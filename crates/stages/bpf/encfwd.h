/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Enc and Fwd (Chaining-Box §5.2.2, §5.2.3), written once as static __always_inline
 * functions: enc.bpf.c, fwd.bpf.c and enc_fwd.bpf.c are entry points over them.
 *
 * Enc (TC egress, after an NSH-unaware SF): the frame's 5-tuple finds the NSH Dec saved in
 * the proxy table, through its slot (maps.h proxy_find) (or, on an interface with
 * CFG_NAT_LEARN, this CPU's last_dec on a miss);
 * SI' = SI - 1; end of path: the frame leaves as it is; otherwise outer Ethernet (zero MACs)
 * and the NSH are pushed and the next TC filter (Fwd) runs.
 *
 * Fwd (TC, either direction): an NSH over Ethernet or VXLAN-GPE transport; TTL decremented
 * before the lookup of (SPI, SI) (RFC 8300 §2.2: a packet whose TTL reaches 0 is not
 * forwarded); the next hop rewrites the transport and redirects, the end of the path removes
 * transport and NSH and delivers the inner frame.
 *
 * Enc+Fwd: both in one program with one parse; the NSH is pushed with the next hop's
 * transport at once (one resize of the packet instead of two).
 *
 * Counters: every program counts under the stage whose work it did (the combined program
 * under both STAGE_ENC and STAGE_FWD, exactly as Enc then Fwd would have).
 */
#ifndef FUSEBOX_ENCFWD_H
#define FUSEBOX_ENCFWD_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "maps.h"
#include "parse.h"

/* The outer IPv4 header of a VXLAN-GPE tunnel. */
#define GPE_IP_TTL 64
#define GPE_IP_DF 0x4000
/* VXLAN-GPE flags: I (VNI valid) and P (next protocol present). */
#define GPE_FLAGS_IP 0x0c
/* Ethernet + IPv4 (no options) + UDP + VXLAN-GPE. */
#define GPE_TRANSPORT_LEN (ETH_LEN + 20 + UDP_LEN + GPE_LEN)

/* Largest header Enc or Fwd writes: the VXLAN-GPE transport and the longest NSH. */
#define PUSH_MAX (GPE_TRANSPORT_LEN + NSH_BASE_LEN + NSH_MAX_CTX)

/* Returned by enc_decide when Enc has an NSH to push (not a TC verdict). */
#define ENC_PUSH 0x1000
/* Returned by fwd_fast when the packet is not its case (not a TC verdict). */
#define FWD_GENERAL 0x1001
/* Returned by enc_fast when the frame is not its case (not a TC verdict). */
#define ENC_GENERAL 0x1002

/*
 * The UDP source port of a VXLAN-GPE packet whose forwarding entry leaves it to us: a hash of
 * the inner 5-tuple in 49152..65535 (RFC 7348 §5), so one flow keeps one outer port.
 *   h = saddr ^ daddr ^ (sport << 16 | dport) ^ proto, each field read in network order as
 *       a big-endian number;
 *   h ^= h >> 16; h *= 0x7feb352d; h ^= h >> 15; h *= 0x846ca68b; h ^= h >> 16;
 *   port = 0xc000 | (h & 0x3fff).
 * An inner frame that is not Ethernet + IPv4 hashes as the all-zero 5-tuple.
 */
static __always_inline __u16 flow_port(const struct flow_key *k)
{
	__u32 h = bpf_ntohl(k->saddr) ^ bpf_ntohl(k->daddr) ^
		  ((__u32)bpf_ntohs(k->sport) << 16 | bpf_ntohs(k->dport)) ^ k->proto;

	h ^= h >> 16;
	h *= 0x7feb352d;
	h ^= h >> 15;
	h *= 0x846ca68b;
	h ^= h >> 16;
	return 0xc000 | (h & 0x3fff);
}

/* The checksum of a 20-byte IPv4 header whose checksum field is zero, as stored. */
static __always_inline __u16 ipv4_csum(const __u16 *w)
{
	__u32 s = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		s += w[i];
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* The context length of `m`, or -1 when it is not a valid MD type 1 or 2 context. */
static __always_inline int nsh_ctx_len(const struct nsh_meta *m)
{
	if (m->md_type == 1)
		return NSH_MD1_LEN - NSH_BASE_LEN;
	if (m->md_type == 2 && m->ctx_len <= NSH_MAX_CTX && !(m->ctx_len & 3))
		return m->ctx_len;
	return -1;
}

/*
 * Writes the NSH of `m` (validated by nsh_ctx_len; next protocol Ethernet, TTL 0 meaning 63)
 * at `out`, which has room for NSH_BASE_LEN + NSH_MAX_CTX bytes. Returns its length.
 */
static __always_inline __u32 nsh_write(__u8 *out, const struct nsh_meta *m)
{
	__u32 len = nsh_write_base(out, m);

	__builtin_memcpy(out + NSH_BASE_LEN, m->ctx, NSH_MAX_CTX);
	return len;
}

/* The next hop's outer Ethernet header (destination, source, EtherType) at `out`. */
static __always_inline void eth_write(__u8 *out, const struct fwd_val *f, __u16 ethertype)
{
	__builtin_memcpy(out, f->dmac, 6);
	__builtin_memcpy(out + 6, f->smac, 6);
	*(__be16 *)(out + 12) = bpf_htons(ethertype);
}

/*
 * The VXLAN-GPE transport (Ethernet, IPv4, UDP, VXLAN-GPE: GPE_TRANSPORT_LEN bytes) at `out`
 * for a tunnel to `f` carrying `payload` bytes (NSH and inner frame) from UDP port `sport`.
 */
static __always_inline void gpe_write(__u8 *out, const struct fwd_val *f, __u32 payload,
				      __u16 sport)
{
	__u8 *ip = out + ETH_LEN;
	__u8 *udp = ip + 20;
	__u8 *gpe = udp + UDP_LEN;

	eth_write(out, f, ETH_P_IP);
	ip[0] = 0x45;
	ip[1] = 0;
	*(__be16 *)(ip + 2) = bpf_htons(20 + UDP_LEN + GPE_LEN + payload);
	*(__be16 *)(ip + 4) = 0;
	*(__be16 *)(ip + 6) = bpf_htons(GPE_IP_DF);
	ip[8] = GPE_IP_TTL;
	ip[9] = IPPROTO_UDP_;
	*(__u16 *)(ip + 10) = 0;
	*(__be32 *)(ip + 12) = f->saddr;
	*(__be32 *)(ip + 16) = f->daddr;
	*(__u16 *)(ip + 10) = ipv4_csum((const __u16 *)ip);
	*(__be16 *)(udp + 0) = bpf_htons(sport);
	*(__be16 *)(udp + 2) = bpf_htons(VXLAN_GPE_PORT);
	*(__be16 *)(udp + 4) = bpf_htons(UDP_LEN + GPE_LEN + payload);
	*(__be16 *)(udp + 6) = 0;
	gpe[0] = GPE_FLAGS_IP;
	gpe[1] = 0;
	gpe[2] = 0;
	gpe[3] = GPE_NP_NSH;
	*(__be32 *)(gpe + 4) = bpf_htonl(f->vni << 8);
}

/* The UDP source port for a tunnel to `f` carrying the inner flow `k`. */
static __always_inline __u16 gpe_sport(const struct fwd_val *f, const struct flow_key *k)
{
	return f->udp_sport ? f->udp_sport : flow_port(k);
}

/* A header under construction in `b`. The two bytes before it align the IPv4 header and the
 * NSH behind an Ethernet header to 4 bytes (the verifier refuses misaligned stack stores). */
struct push_buf {
	__u8 pad[2];
	__u8 b[PUSH_MAX];
} __attribute__((aligned(8)));

/* Grows the packet at its head by `len` bytes and writes `hdr` there. */
static __always_inline int push_head(struct __sk_buff *skb, const struct push_buf *hdr, __u32 len)
{
	if (len < ETH_LEN || len > PUSH_MAX)
		return -1;
	if (bpf_skb_change_head(skb, len, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, hdr->b, len, 0);
}

/* The outer Ethernet header (the 12 bytes at `macs`, destination then source, or zero MACs
 * when NULL; EtherType NSH) and the NSH base header of `m` leaving with TTL `ttl`, at `eth`
 * (packet data), in whole 64-, 32- and 16-bit stores: a memcpy or memset into the packet,
 * whose alignment clang does not know, would be a store per byte. `macs8`: `macs` is 8-byte
 * aligned (a cls_hop), read in two loads; else 2-byte (a fwd_val, perhaps on the stack,
 * where the verifier refuses misaligned loads), read in six. */
static __always_inline void eth_nsh_head(__u8 *eth, const struct nsh_meta *m, __u8 ttl,
					 const __u8 *macs, int macs8)
{
	if (macs && macs8) {
		*(__u64 *)eth = *(const __u64 *)macs;
		*(__u32 *)(eth + 8) = *(const __u32 *)(macs + 8);
	} else if (macs) {
		mac_copy(eth, macs);
		mac_copy(eth + 6, macs + 6);
	} else {
		*(__u64 *)eth = 0;
		*(__u32 *)(eth + 8) = 0;
	}
	*(__u16 *)(eth + 12) = bpf_htons(ETH_P_NSH);
	nsh_write_base_ttl(eth + ETH_LEN, m, ttl);
}

/*
 * Grows the packet at its head by an outer Ethernet header and the NSH of `m` (validated by
 * nsh_ctx_len: `clen` context bytes) and writes both through direct packet access: one
 * helper call, the NSH leaving with TTL `ttl`. The outer MACs are the 12 bytes at `macs`
 * (destination, source: a fwd_val's, or with `macs8` a cls_hop's; eth_nsh_head), or zero
 * when `macs` is NULL (Enc alone: Fwd writes them); the EtherType is NSH. The bytes
 * bpf_skb_change_head pushes are always in the linear part; the bounds checks are for the
 * verifier. Returns 0, or -1 when the kernel refused.
 */
static __always_inline int push_eth_nsh_macs(struct __sk_buff *skb, const struct nsh_meta *m,
					     __u8 ttl, __u32 clen, const __u8 *macs, int macs8)
{
	void *data, *data_end;
	__u8 *eth;

	if (clen > NSH_MAX_CTX)
		return -1;
	if (bpf_skb_change_head(skb, ETH_LEN + NSH_BASE_LEN + clen, 0))
		return -1;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if (clen == NSH_MD1_LEN - NSH_BASE_LEN) {
		/* MD type 1: the whole header in one bounds check, its context in two 64-bit
		 * loads and stores (m->ctx is 8-byte aligned in every entry and META_ALIGNED
		 * copy; on the stack the verifier would refuse it otherwise) */
		if (!HAS(data, data_end, 0, ETH_LEN + NSH_MD1_LEN))
			return -1;
		eth_nsh_head(eth, m, ttl, macs, macs8);
		*(__u64 *)(eth + ETH_LEN + NSH_BASE_LEN) = *(const __u64 *)m->ctx;
		*(__u64 *)(eth + ETH_LEN + NSH_BASE_LEN + 8) = *(const __u64 *)(m->ctx + 8);
		return 0;
	}
	if (!HAS(data, data_end, 0, ETH_LEN + NSH_BASE_LEN))
		return -1;
	eth_nsh_head(eth, m, ttl, macs, macs8);
	return nsh_write_md2_ctx(data, data_end, m, clen);
}

/* push_eth_nsh_macs with `m`'s own TTL and the MACs of `f` (zero when NULL). */
static __always_inline int push_eth_nsh(struct __sk_buff *skb, const struct nsh_meta *m,
					__u32 clen, const struct fwd_val *f)
{
	return push_eth_nsh_macs(skb, m, meta_ttl(m), clen, f ? f->dmac : NULL, 0);
}

/* Most bytes after the cut pull_front moves. */
#define MOVE_CHUNK 256
#define MOVE_CHUNKS 64

/* pull_front's buffer, one per CPU: on the stack it would take half of the 512 bytes a
 * program has, and leave Fwd's fast path no room to call its slow path. Not pinned: each
 * object has its own. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[MOVE_CHUNK]);
} move_buf SEC(".maps");

/*
 * Removes the first `n` bytes of the packet by moving the rest down in chunks and trimming
 * the tail: bpf_skb_adjust_room works only on packets the kernel took for IP (skb->protocol),
 * which an NSH-over-Ethernet frame is not. At most MOVE_CHUNK * MOVE_CHUNKS bytes (16 KiB)
 * after the cut; SF interfaces run without GSO/GRO.
 */
static __always_inline int pull_front(struct __sk_buff *skb, __u32 n)
{
	__u32 zero = 0;
	__u8 *buf = bpf_map_lookup_elem(&move_buf, &zero);
	__u64 len = skb->len, rest;

	if (!buf || n >= len)
		return -1;
	rest = len - n;
	if (rest > MOVE_CHUNK * MOVE_CHUNKS)
		return -1;
	for (__u64 i = 0; i < MOVE_CHUNKS; i++) {
		__u64 off = i * MOVE_CHUNK, c;

		if (off >= rest)
			break;
		c = rest - off;
		if (c > MOVE_CHUNK)
			c = MOVE_CHUNK;
		if (c == 0)
			break;
		if (bpf_skb_load_bytes(skb, n + off, buf, c))
			return -1;
		if (bpf_skb_store_bytes(skb, off, buf, c, 0))
			return -1;
	}
	return bpf_skb_change_tail(skb, rest, 0);
}

/*
 * Removes `n` bytes in front of what the packet keeps, leaving at least ETH_LEN bytes that
 * the caller overwrites. Over VXLAN-GPE (`ip`: the kernel took the frame for IPv4)
 * bpf_skb_adjust_room cuts them behind the outer Ethernet header without moving the payload;
 * otherwise, or if it refuses, pull_front moves the packet.
 */
static __always_inline int cut_head(struct __sk_buff *skb, __u32 n, int ip)
{
	if (ip && n <= 0xfff && !bpf_skb_adjust_room(skb, -(__s32)n, BPF_ADJ_ROOM_MAC, 0))
		return 0;
	return pull_front(skb, n);
}

/* Where the packet goes once Fwd rewrote it for a next hop on interface `ifindex` (0: the
 * current one), to its ingress when `ingress`. */
static __always_inline int fwd_send(__u32 ifindex, int ingress)
{
	if (!ifindex)
		return TC_ACT_OK;
	return bpf_redirect(ifindex, ingress ? BPF_F_INGRESS : 0);
}

/* fwd_send for the next hop `f`. */
static __always_inline int fwd_out(const struct fwd_val *f)
{
	return fwd_send(f->ifindex, f->flags & FWDF_INGRESS);
}

/* Counts `ctr` of `stage` and returns the verdict `v`. */
static __always_inline int verdict(__u32 stage, __u32 ctr, int v)
{
	count(stage, ctr);
	return v;
}

/*
 * Enc's decision for the frame of `skb`: a TC verdict (passed, end of chain, dropped;
 * counted), or ENC_PUSH with the NSH to push in `m` (its SPH already SI - 1) and, when `fv`
 * is not NULL (Enc+Fwd), the forwarding entry for it (copied into `fbuf`; NULL if none) in
 * `*fv`. `key` receives the frame's 5-tuple.
 */
static __always_inline int enc_decide(struct __sk_buff *skb, struct flow_key *key,
				      struct nsh_meta *m, struct fwd_val **fv,
				      struct fwd_val *fbuf)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	if (parse_flow_at0(data, data_end, key) < 0)
		return verdict(STAGE_ENC, CTR_PASSED, TC_ACT_OK);
	if (!proxy_find(key, m)) {
		/* NAT-aware: the SF rewrote the 5-tuple of the frame this CPU's Dec handed it
		 * (same softirq run); learn the translated key. last_dec is consumed, so one
		 * decapsulation teaches at most one key. */
		__u32 ifindex = skb->ifindex, zero = 0;
		struct stage_cfg cbuf;
		struct stage_cfg *c = cfg_find(ifindex, &cbuf);
		struct nsh_meta *l;

		if (!c || !(c->flags & CFG_NAT_LEARN))
			return verdict(STAGE_ENC, CTR_PROXY_MISS, TC_ACT_OK);
		l = bpf_map_lookup_elem(&last_dec, &zero);
		if (!l || !l->md_type)
			return verdict(STAGE_ENC, CTR_PROXY_MISS, TC_ACT_OK);
		meta_copy(m, l);
		m->flags = PROXY_LEARNED;
		l->md_type = 0;
		if (!proxy_store(key, m))
			count(STAGE_ENC, CTR_LEARNED);
	}
	/* SI 0 cannot be decremented: the path is over (RFC 8300 §2.3). */
	if (nsh_ctx_len(m) < 0 || !(m->sph & 0xff))
		return verdict(STAGE_ENC, CTR_DROP_BAD_NSH, TC_ACT_SHOT);
	m->sph -= 1;
	if (!fv) {
		/* Enc alone: only whether the path ends here */
		if (fwd_action(m->sph) == FWD_END)
			return verdict(STAGE_ENC, CTR_DELIVERED, TC_ACT_OK);
		return ENC_PUSH;
	}
	*fv = fwd_find(m->sph, fbuf);
	if (*fv && (*fv)->action == FWD_END)
		return verdict(STAGE_ENC, CTR_DELIVERED, TC_ACT_OK);
	return ENC_PUSH;
}

/* Fwd's TTL rule (RFC 8300 §2.2): decremented before the lookup, never forwarded at 0.
 * Returns the new TTL, or 0 when the packet must be dropped. */
static __always_inline __u8 ttl_next(__u8 ttl)
{
	return ttl > 1 ? ttl - 1 : 0;
}

/* ttl_next of the NSH `m` (a TTL of 0 in an entry meaning 63): the TTL Fwd sends it with. */
static __always_inline __u8 meta_ttl_next(const struct nsh_meta *m)
{
	return ttl_next(meta_ttl(m));
}

/* An Ethernet next hop for the NSH `m` (validated, `clen` context bytes) leaving with TTL
 * `ttl` (Fwd's, meta_ttl_next): outer Ethernet (the 12 bytes at `macs`, `macs8` as for
 * push_eth_nsh_macs) and NSH pushed at once, then sent on (fwd_send); counted under Fwd
 * (`done`: counter_at(STAGE_FWD, CTR_DONE), looked up by the caller). */
static __always_inline int fwd_push_send(struct __sk_buff *skb, const struct nsh_meta *m,
					 __u8 ttl, __u32 clen, const __u8 *macs, int macs8,
					 __u32 ifindex, int ingress, __u64 *done)
{
	if (push_eth_nsh_macs(skb, m, ttl, clen, macs, macs8))
		return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
	count_at(done);
	return fwd_send(ifindex, ingress);
}

/* fwd_push_send to Fwd's Ethernet next hop `f`. */
static __always_inline int fwd_push_eth(struct __sk_buff *skb, const struct nsh_meta *m,
					__u8 ttl, __u32 clen, const struct fwd_val *f, __u64 *done)
{
	return fwd_push_send(skb, m, ttl, clen, f->dmac, 0, f->ifindex, f->flags & FWDF_INGRESS,
			     done);
}

/*
 * Enc's steady state, and Enc+Fwd's (`with_fwd`) towards an Ethernet next hop, tried before
 * the general code: the common frame (untagged Ethernet, IPv4 without options:
 * parse_flow_at0's fixed case), an MD type 1 NSH for its 5-tuple in the proxy table with SI
 * above 0, and for SI - 1 a next hop that is not the end of the path (Enc) or an Ethernet
 * one in its slot with the TTL not expiring (Enc+Fwd). Pushes what the general code pushes
 * and counts what it counts; any other frame returns ENC_GENERAL with nothing changed or
 * counted but the proxy slot's cache (proxy_find may fill it), and the general code takes it
 * from the start — the misses (NAT learning among them), MD type 2, the end of the path,
 * VXLAN-GPE, the drops. Apart for the reason fwd_fast is (docs/benchmarks.md: Enc+Fwd about
 * a sixth less time).
 */
static __always_inline int enc_fast(struct __sk_buff *skb, int with_fwd)
{
	__u64 *enc_done = counter_at(STAGE_ENC, CTR_DONE);
	__u64 *fwd_done = with_fwd ? counter_at(STAGE_FWD, CTR_DONE) : NULL;
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct nsh_meta buf META_ALIGNED, *m;
	struct flow_key key;
	struct fwd_val *f;
	__u32 sph;
	__u8 ttl;

	if (parse_flow_fixed(data, data_end, &key) < 0)
		return ENC_GENERAL;
	m = proxy_find(&key, &buf);
	if (!m || m->md_type != 1 || !(m->sph & 0xff))
		return ENC_GENERAL;
	sph = m->sph - 1;
	if (!with_fwd) {
		if (fwd_action(sph) == FWD_END)
			return ENC_GENERAL;
		m->sph = sph;
		if (push_eth_nsh(skb, m, NSH_MD1_LEN - NSH_BASE_LEN, NULL))
			return verdict(STAGE_ENC, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		count_at(enc_done);
		return TC_ACT_UNSPEC;
	}
	ttl = meta_ttl_next(m);
	if (!ttl)
		return ENC_GENERAL;
	f = fwd_slot_eth(sph);
	if (!f)
		return ENC_GENERAL;
	m->sph = sph;
	count_at(enc_done);
	return fwd_push_eth(skb, m, ttl, NSH_MD1_LEN - NSH_BASE_LEN, f, fwd_done);
}

/* Enc alone: pushes outer Ethernet (zero MACs, EtherType NSH) and the NSH, then lets the
 * next TC filter (Fwd) run. */
static __always_inline int enc_run(struct __sk_buff *skb)
{
	struct flow_key key = {};
	struct nsh_meta m META_ALIGNED;
	int r = enc_fast(skb, 0);

	if (r != ENC_GENERAL)
		return r;
	r = enc_decide(skb, &key, &m, NULL, NULL);
	if (r != ENC_PUSH)
		return r;
	if (push_eth_nsh(skb, &m, nsh_ctx_len(&m), NULL))
		return verdict(STAGE_ENC, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
	return verdict(STAGE_ENC, CTR_DONE, TC_ACT_UNSPEC);
}

/* Enc+Fwd: Enc's decision, then Fwd's on the NSH Enc would have pushed (TTL, next hop),
 * then one push of the next hop's transport and the NSH. */
static __always_inline int enc_fwd_run(struct __sk_buff *skb)
{
	struct flow_key key = {};
	struct nsh_meta m META_ALIGNED;
	struct push_buf hdr;
	struct fwd_val *f, fbuf;
	__u32 n, len = skb->len;
	int r = enc_fast(skb, 1);

	if (r != ENC_GENERAL)
		return r;
	r = enc_decide(skb, &key, &m, &f, &fbuf);
	if (r != ENC_PUSH)
		return r;
	count(STAGE_ENC, CTR_DONE);
	m.ttl = meta_ttl_next(&m);
	if (!m.ttl)
		return verdict(STAGE_FWD, CTR_DROP_TTL, TC_ACT_SHOT);
	if (!f)
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
	if (f->action == FWD_ETHERNET) {
		return fwd_push_eth(skb, &m, m.ttl, nsh_ctx_len(&m), f,
				    counter_at(STAGE_FWD, CTR_DONE));
	} else if (f->action == FWD_VXLAN_GPE) {
		__builtin_memset(&hdr, 0, sizeof(hdr));
		n = nsh_write(hdr.b + GPE_TRANSPORT_LEN, &m);
		if (len + n + GPE_TRANSPORT_LEN - ETH_LEN > 0xffff)
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		gpe_write(hdr.b, f, n + len, gpe_sport(f, &key));
		n += GPE_TRANSPORT_LEN;
	} else {
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
	}
	if (push_head(skb, &hdr, n))
		return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
	return verdict(STAGE_FWD, CTR_DONE, fwd_out(f));
}

/*
 * Gives the packet a transport of `want` bytes in front of its NSH, which now has `have`:
 * grown at the head, or cut (see cut_head). The caller then writes all `want` bytes.
 */
static __always_inline int fwd_transport(struct __sk_buff *skb, __u32 have, __u32 want,
					 int ip)
{
	if (have < want)
		return bpf_skb_change_head(skb, want - have, 0);
	if (have > want)
		return cut_head(skb, have - want, ip);
	return 0;
}

/*
 * Fwd's common case, tried before the general code: a valid NSH (MD type 1 or 2) right
 * behind an untagged Ethernet header, TTL above 1, and an Ethernet next hop in its slot of
 * fwd_slots, at rest (fwd_slot_eth). The transport keeps its length: the MACs and the NSH's
 * first word (TTL) are rewritten in place. Returns the verdict, or FWD_GENERAL for any other
 * packet, which the general code then takes with every check in find_nsh's order (so a
 * packet this declines gets the same reason, frame and verdict as before it existed).
 *
 * Why apart: in one function with the general code (VXLAN-GPE, VLAN tags, end of path,
 * resizing), clang shared the counting tails between all the paths and kept their values in
 * registers and stack slots set on every branch: about 150 instructions where these take 40,
 * and Fwd 1.4x Chaining-Box's instead of about 0.5x (docs/benchmarks.md).
 */
static __always_inline int fwd_fast(struct __sk_buff *skb)
{
	__u64 *done = counter_at(STAGE_FWD, CTR_DONE);
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 *p = data;
	struct fwd_val *f;
	__u32 w0, sph, len, md, ttl;

	if (!HAS(data, data_end, 0, ETH_LEN + NSH_MD1_LEN) ||
	    *(__u16 *)(p + 12) != bpf_htons(ETH_P_NSH))
		return FWD_GENERAL;
	w0 = bpf_ntohl(*(__u32 *)(p + ETH_LEN));
	sph = bpf_ntohl(*(__u32 *)(p + ETH_LEN + 4));
	/* find_nsh's rules: MD type 1 (version 0, length 6 words) in one masked compare, MD
	 * type 2 (version 0, 2 words up to the longest context, all present) after it */
	if ((w0 & 0xc03f0f00) != ((NSH_MD1_LEN / 4) << 16 | 1 << 8)) {
		len = (w0 >> 14) & 0xfc;
		md = (w0 >> 8) & 0x0f;
		if ((w0 >> 30) || md != 2 || len < NSH_BASE_LEN ||
		    len > NSH_BASE_LEN + NSH_MAX_CTX || !HAS(data, data_end, ETH_LEN, len))
			return FWD_GENERAL;
	}
	ttl = (w0 >> 22) & 0x3f;
	if (ttl <= 1)
		return FWD_GENERAL;
	f = fwd_slot_eth(sph);
	if (!f)
		return FWD_GENERAL;
	mac_copy(p, f->dmac);
	mac_copy(p + 6, f->smac);
	*(__u32 *)(p + ETH_LEN) = bpf_htonl((w0 & ~(0x3fu << 22)) | (ttl - 1) << 22);
	count_at(done);
	return fwd_out(f);
}

/* Fwd's general code: any transport, any next hop, the end of the path. */
static __always_inline int fwd_general(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct flow_key inner = {};
	struct push_buf hdr;
	struct nsh_loc loc = {};
	struct fwd_val *f, fbuf;
	__u32 len = skb->len, sph, want;
	__u8 *nsh, b0, b1, ttl, np[2];
	int r;

	r = find_nsh(data, data_end, &loc);
	if (r < 0)
		return verdict(STAGE_FWD, CTR_PASSED, TC_ACT_OK);
	if (r > 0)
		return verdict(STAGE_FWD, r, TC_ACT_SHOT);
	if (loc.nsh > PARSE_MAX_OFF || !HAS(data, data_end, loc.nsh, NSH_BASE_LEN))
		return verdict(STAGE_FWD, CTR_DROP_TRUNCATED, TC_ACT_SHOT);
	nsh = (__u8 *)data + loc.nsh;
	b0 = nsh[0];
	b1 = nsh[1];
	sph = (__u32)nsh[4] << 24 | (__u32)nsh[5] << 16 | (__u32)nsh[6] << 8 | nsh[7];

	ttl = ttl_next((b0 & 0x0f) << 2 | b1 >> 6);
	if (!ttl)
		return verdict(STAGE_FWD, CTR_DROP_TTL, TC_ACT_SHOT);
	f = fwd_find(sph, &fbuf);
	if (!f)
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);

	if (f->action == FWD_END) {
		__u8 eth[ETH_LEN];

		if (loc.next_proto != NSH_NP_ETHERNET)
			return verdict(STAGE_FWD, CTR_DROP_INNER, TC_ACT_SHOT);
		if (bpf_skb_load_bytes(skb, loc.inner, eth, ETH_LEN))
			return verdict(STAGE_FWD, CTR_DROP_TRUNCATED, TC_ACT_SHOT);
		if (cut_head(skb, loc.inner, loc.vxlan) ||
		    bpf_skb_store_bytes(skb, 0, eth, ETH_LEN, 0))
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		return verdict(STAGE_FWD, CTR_DELIVERED, fwd_out(f));
	}
	if (f->action == FWD_ETHERNET && !loc.vxlan && loc.nsh == ETH_LEN &&
	    HAS(data, data_end, 0, ETH_LEN + NSH_BASE_LEN)) {
		/* Ethernet to Ethernet, no VLAN tag: the transport keeps its length and its
		 * EtherType; rewrite the MACs and the TTL in place. */
		__u8 *p = data;

		__builtin_memcpy(p, f->dmac, 6);
		__builtin_memcpy(p + 6, f->smac, 6);
		p[ETH_LEN] = (b0 & 0xf0) | ttl >> 2;
		p[ETH_LEN + 1] = (ttl & 3) << 6 | (b1 & 0x3f);
		return verdict(STAGE_FWD, CTR_DONE, fwd_out(f));
	}
	__builtin_memset(&hdr, 0, sizeof(hdr));
	if (f->action == FWD_ETHERNET) {
		want = ETH_LEN;
		eth_write(hdr.b, f, ETH_P_NSH);
	} else if (f->action == FWD_VXLAN_GPE) {
		__u32 payload = len - loc.nsh; /* NSH and inner frame */

		if (payload + GPE_TRANSPORT_LEN - ETH_LEN > 0xffff)
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		if (!f->udp_sport && loc.next_proto == NSH_NP_ETHERNET)
			parse_flow(data, data_end, loc.inner, &inner);
		want = GPE_TRANSPORT_LEN;
		gpe_write(hdr.b, f, payload, gpe_sport(f, &inner));
	} else {
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
	}
	np[0] = (b0 & 0xf0) | ttl >> 2;
	np[1] = (ttl & 3) << 6 | (b1 & 0x3f);
	if (fwd_transport(skb, loc.nsh, want, loc.vxlan) ||
	    bpf_skb_store_bytes(skb, 0, hdr.b, want, 0) ||
	    bpf_skb_store_bytes(skb, want, np, 2, 0))
		return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
	return verdict(STAGE_FWD, CTR_DONE, fwd_out(f));
}

/* Fwd alone: fwd_fast, else the general code. */
static __always_inline int fwd_run(struct __sk_buff *skb)
{
	int fast = fwd_fast(skb);

	if (fast != FWD_GENERAL)
		return fast;
	return fwd_general(skb);
}

#endif
