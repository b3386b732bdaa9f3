/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Enc and Fwd (Chaining-Box §5.2.2, §5.2.3), written once as static __always_inline
 * functions: enc.bpf.c, fwd.bpf.c and enc_fwd.bpf.c are entry points over them.
 *
 * Enc (TC egress, after an NSH-unaware SF): the frame's 5-tuple finds the NSH Dec saved in
 * the proxy table (or, on an interface with CFG_NAT_LEARN, this CPU's last_dec on a miss);
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
#include "encfwd_parse.h" /* until parse.h lands */

/* The outer IPv4 header of a VXLAN-GPE tunnel. */
#define GPE_IP_TTL 64
#define GPE_IP_DF 0x4000
/* Ethernet + IPv4 (no options) + UDP + VXLAN-GPE. */
#define GPE_TRANSPORT_LEN (ETH_HLEN + 20 + 8 + 8)
/* VXLAN-GPE flags: I (VNI valid) and P (next protocol present). */
#define GPE_FLAGS_IP 0x0c

/* Largest header Enc or Fwd pushes: the VXLAN-GPE transport and the longest NSH. */
#define PUSH_MAX (GPE_TRANSPORT_LEN + NSH_BASE_LEN + NSH_MAX_CTX)

/* Returned by enc_decide when Enc has an NSH to push (not a TC verdict). */
#define ENC_PUSH 0x1000

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
	if (m->md_type == NSH_MD1)
		return NSH_MD1_CTX;
	if (m->md_type == NSH_MD2 && m->ctx_len <= NSH_MAX_CTX && !(m->ctx_len & 3))
		return m->ctx_len;
	return -1;
}

/*
 * Writes the NSH for `m` (whose context is `clen` bytes, from nsh_ctx_len) with service path
 * header `sph` and TTL `ttl`, next protocol Ethernet, at `out`, which has room for
 * NSH_BASE_LEN + NSH_MAX_CTX bytes. Returns its length.
 */
static __always_inline __u32 nsh_write(__u8 *out, const struct nsh_meta *m, __u32 clen,
				       __u32 sph, __u8 ttl)
{
	ttl &= 0x3f;
	out[0] = ttl >> 2; /* version 0, O and U bits clear */
	out[1] = (ttl & 3) << 6 | (2 + clen / 4);
	out[2] = m->md_type;
	out[3] = NSH_NP_ETHERNET;
	*(__be32 *)(out + 4) = bpf_htonl(sph);
	__builtin_memcpy(out + NSH_BASE_LEN, m->ctx, NSH_MAX_CTX);
	return NSH_BASE_LEN + clen;
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
 * for a tunnel carrying `payload` bytes (NSH and inner frame) with UDP source port `sport`.
 */
static __always_inline void gpe_write(__u8 *out, const struct fwd_val *f, __u32 payload,
				      __u16 sport)
{
	__u8 *ip = out + ETH_HLEN;
	__u8 *udp = ip + 20;
	__u8 *gpe = udp + 8;

	eth_write(out, f, ETH_P_IP);
	ip[0] = 0x45;
	ip[1] = 0;
	*(__be16 *)(ip + 2) = bpf_htons(20 + 8 + 8 + payload);
	*(__be16 *)(ip + 4) = 0;
	*(__be16 *)(ip + 6) = bpf_htons(GPE_IP_DF);
	ip[8] = GPE_IP_TTL;
	ip[9] = IPPROTO_UDP;
	*(__u16 *)(ip + 10) = 0;
	*(__be32 *)(ip + 12) = f->saddr;
	*(__be32 *)(ip + 16) = f->daddr;
	*(__u16 *)(ip + 10) = ipv4_csum((const __u16 *)ip);
	*(__be16 *)(udp + 0) = bpf_htons(sport);
	*(__be16 *)(udp + 2) = bpf_htons(VXLAN_GPE_PORT);
	*(__be16 *)(udp + 4) = bpf_htons(8 + 8 + payload);
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
	if (len < ETH_HLEN || len > PUSH_MAX)
		return -1;
	if (bpf_skb_change_head(skb, len, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, hdr->b, len, 0);
}

/* Where the packet goes once Fwd rewrote it for `f`. */
static __always_inline int fwd_out(const struct fwd_val *f)
{
	if (!f->ifindex)
		return TC_ACT_OK;
	return bpf_redirect(f->ifindex, (f->flags & FWDF_INGRESS) ? BPF_F_INGRESS : 0);
}

/* Counts `ctr` of `stage` and returns `verdict`. */
static __always_inline int verdict(__u32 stage, __u32 ctr, int v)
{
	count(stage, ctr);
	return v;
}

/*
 * Enc's decision for the frame at the head of `skb`: a TC verdict (passed, end of chain,
 * dropped; counted), or ENC_PUSH with the NSH to push in `m`, its context length in
 * `*clen`, its new service path header in `*sph` and the forwarding entry for it (NULL if
 * none) in `*fv`. `key` receives the frame's 5-tuple.
 */
static __always_inline int enc_decide(struct __sk_buff *skb, struct flow_key *key,
				      struct nsh_meta *m, __u32 *clen, __u32 *sph,
				      struct fwd_val **fv)
{
	int cl;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct nsh_meta *p;

	count(STAGE_ENC, CTR_PACKETS);
	if (flow_parse(data, end, 0, key) < 0)
		return verdict(STAGE_ENC, CTR_PASSED, TC_ACT_OK);
	p = bpf_map_lookup_elem(&proxy_table, key);
	if (p) {
		*m = *p;
	} else {
		/* NAT-aware: the SF rewrote the 5-tuple of the frame this CPU's Dec handed it
		 * (same softirq run); learn the translated key. last_dec is consumed so that one
		 * decapsulation teaches at most one key. */
		__u32 ifindex = skb->ifindex, zero = 0;
		struct stage_cfg *c = bpf_map_lookup_elem(&cfg, &ifindex);
		struct nsh_meta *l;

		if (!c || !(c->flags & CFG_NAT_LEARN))
			return verdict(STAGE_ENC, CTR_PROXY_MISS, TC_ACT_OK);
		l = bpf_map_lookup_elem(&last_dec, &zero);
		if (!l || !l->md_type)
			return verdict(STAGE_ENC, CTR_PROXY_MISS, TC_ACT_OK);
		*m = *l;
		m->flags = PROXY_LEARNED;
		l->md_type = 0;
		if (!bpf_map_update_elem(&proxy_table, key, m, BPF_ANY))
			count(STAGE_ENC, CTR_LEARNED);
	}
	/* SI 0 cannot be decremented: the path is over (RFC 8300 §2.3). */
	cl = nsh_ctx_len(m);
	if (cl < 0 || !(m->sph & 0xff))
		return verdict(STAGE_ENC, CTR_DROP_BAD_NSH, TC_ACT_SHOT);
	*clen = cl;
	*sph = m->sph - 1;
	*fv = bpf_map_lookup_elem(&fwd_table, sph);
	if (*fv && (*fv)->action == FWD_END)
		return verdict(STAGE_ENC, CTR_DELIVERED, TC_ACT_OK);
	return ENC_PUSH;
}

/* Enc alone: pushes outer Ethernet (zero MACs, EtherType NSH) and the NSH, then lets the
 * next TC filter (Fwd) run. */
static __always_inline int enc_run(struct __sk_buff *skb)
{
	struct flow_key key = {};
	struct nsh_meta m;
	struct push_buf hdr = {};
	struct fwd_val *fv;
	__u32 sph, clen, n;
	int r;

	r = enc_decide(skb, &key, &m, &clen, &sph, &fv);
	if (r != ENC_PUSH)
		return r;
	*(__be16 *)(hdr.b + 12) = bpf_htons(ETH_P_NSH);
	n = nsh_write(hdr.b + ETH_HLEN, &m, clen, sph, m.ttl);
	if (push_head(skb, &hdr, ETH_HLEN + n))
		return verdict(STAGE_ENC, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
	return verdict(STAGE_ENC, CTR_DONE, TC_ACT_UNSPEC);
}

/* Enc+Fwd: Enc's decision, then Fwd's on the NSH Enc would have pushed (TTL, next hop),
 * then one push of the next hop's transport and the NSH. */
static __always_inline int enc_fwd_run(struct __sk_buff *skb)
{
	struct flow_key key = {};
	struct nsh_meta m;
	struct push_buf hdr = {};
	struct fwd_val *f;
	__u32 sph, clen, n, len = skb->len;
	int r;

	r = enc_decide(skb, &key, &m, &clen, &sph, &f);
	if (r != ENC_PUSH)
		return r;
	count(STAGE_ENC, CTR_DONE);
	count(STAGE_FWD, CTR_PACKETS);
	if ((m.ttl & 0x3f) <= 1)
		return verdict(STAGE_FWD, CTR_DROP_TTL, TC_ACT_SHOT);
	if (!f)
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
	if (f->action == FWD_ETHERNET) {
		eth_write(hdr.b, f, ETH_P_NSH);
		n = ETH_HLEN + nsh_write(hdr.b + ETH_HLEN, &m, clen, sph, m.ttl - 1);
	} else if (f->action == FWD_VXLAN_GPE) {
		n = nsh_write(hdr.b + GPE_TRANSPORT_LEN, &m, clen, sph, m.ttl - 1);
		if (len + n + GPE_TRANSPORT_LEN - ETH_HLEN > 0xffff)
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

/* Most bytes of inner frame the Ethernet-transport end of path moves (see fwd_strip). */
#define MOVE_CHUNK 256
#define MOVE_CHUNKS 64

/*
 * Removes the first `n` bytes of the packet. bpf_skb_adjust_room works only on packets the
 * kernel took for IP (skb->protocol), which an NSH-over-Ethernet frame is not: the rest of
 * the frame is moved down by `n` in chunks and the tail trimmed. Frames of at most
 * MOVE_CHUNK * MOVE_CHUNKS bytes after the cut (16 KiB; SF interfaces run without
 * GSO/GRO).
 */
static __always_inline int pull_front(struct __sk_buff *skb, __u32 n)
{
	__u8 buf[MOVE_CHUNK];
	__u64 len = skb->len, rest;

	if (n >= len)
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
 * End of path: removes transport and NSH (`nsh` describes them), leaving the inner frame.
 * Over VXLAN-GPE the kernel took the frame for IPv4 and bpf_skb_adjust_room cuts the headers
 * after the outer Ethernet header, which the inner one then overwrites; over Ethernet the
 * frame is moved (pull_front).
 */
static __always_inline int fwd_strip(struct __sk_buff *skb, const struct nsh_loc *nsh)
{
	__u32 cut = nsh->off + nsh->len; /* where the inner frame starts */
	__u8 inner[ETH_HLEN];

	if (!nsh->gpe)
		return pull_front(skb, cut);
	if (cut > 0xfff || bpf_skb_load_bytes(skb, cut, inner, ETH_HLEN))
		return -1;
	if (bpf_skb_adjust_room(skb, -(__s32)cut, BPF_ADJ_ROOM_MAC, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, inner, ETH_HLEN, 0);
}

/* Fwd alone. */
static __always_inline int fwd_run(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct flow_key inner = {};
	struct push_buf hdr = {};
	struct nsh_loc nsh = {};
	struct fwd_val *f;
	__u8 ttl2[2];
	__u32 len = skb->len, ttl;
	int r;

	count(STAGE_FWD, CTR_PACKETS);
	r = nsh_parse(data, end, &nsh);
	if (r == NSH_NONE)
		return verdict(STAGE_FWD, CTR_PASSED, TC_ACT_OK);
	if (r == NSH_TRUNCATED)
		return verdict(STAGE_FWD, CTR_DROP_TRUNCATED, TC_ACT_SHOT);
	if (r != NSH_OK)
		return verdict(STAGE_FWD, CTR_DROP_BAD_NSH, TC_ACT_SHOT);

	/* RFC 8300 §2.2: decrement the TTL before the lookup; never forward a TTL of 0. */
	ttl = nsh.ttl;
	if (ttl <= 1)
		return verdict(STAGE_FWD, CTR_DROP_TTL, TC_ACT_SHOT);
	f = bpf_map_lookup_elem(&fwd_table, &nsh.sph);
	if (!f)
		return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
	ttl -= 1;
	ttl2[0] = (nsh.b0 & 0xf0) | ttl >> 2;
	ttl2[1] = (ttl & 3) << 6 | (nsh.b1 & 0x3f);

	if (f->action == FWD_END) {
		if (nsh.next_proto != NSH_NP_ETHERNET)
			return verdict(STAGE_FWD, CTR_DROP_INNER, TC_ACT_SHOT);
		if (nsh.off + nsh.len + ETH_HLEN > len)
			return verdict(STAGE_FWD, CTR_DROP_TRUNCATED, TC_ACT_SHOT);
		if (fwd_strip(skb, &nsh))
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		return verdict(STAGE_FWD, CTR_DELIVERED, fwd_out(f));
	}
	if (f->action == FWD_ETHERNET) {
		eth_write(hdr.b, f, ETH_P_NSH);
		if (nsh.gpe &&
		    bpf_skb_adjust_room(skb, -(__s32)(nsh.off - ETH_HLEN), BPF_ADJ_ROOM_MAC, 0))
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		if (bpf_skb_store_bytes(skb, 0, hdr.b, ETH_HLEN, 0) ||
		    bpf_skb_store_bytes(skb, ETH_HLEN, ttl2, 2, 0))
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		return verdict(STAGE_FWD, CTR_DONE, fwd_out(f));
	}
	if (f->action == FWD_VXLAN_GPE) {
		__u32 payload = len - nsh.off; /* NSH and inner frame */

		if (payload + GPE_TRANSPORT_LEN - ETH_HLEN > 0xffff)
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		if (!f->udp_sport)
			flow_parse(data, end, nsh.off + nsh.len, &inner);
		gpe_write(hdr.b, f, payload, gpe_sport(f, &inner));
		/* Make the transport GPE_TRANSPORT_LEN long: grow an Ethernet one at the head,
		 * cut IPv4 options from a VXLAN-GPE one. */
		if (nsh.off < GPE_TRANSPORT_LEN) {
			if (bpf_skb_change_head(skb, GPE_TRANSPORT_LEN - nsh.off, 0))
				return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		} else if (nsh.off > GPE_TRANSPORT_LEN) {
			if (bpf_skb_adjust_room(skb, -(__s32)(nsh.off - GPE_TRANSPORT_LEN),
						BPF_ADJ_ROOM_MAC, 0))
				return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		}
		if (bpf_skb_store_bytes(skb, 0, hdr.b, GPE_TRANSPORT_LEN, 0) ||
		    bpf_skb_store_bytes(skb, GPE_TRANSPORT_LEN, ttl2, 2, 0))
			return verdict(STAGE_FWD, CTR_DROP_NO_ROOM, TC_ACT_SHOT);
		return verdict(STAGE_FWD, CTR_DONE, fwd_out(f));
	}
	return verdict(STAGE_FWD, CTR_DROP_UNKNOWN_SPI, TC_ACT_SHOT);
}

#endif
