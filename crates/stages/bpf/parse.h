/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounds-checked parsing shared by every stage (XDP and TC see the same linear frame:
 * `data` .. `data_end`). Every read is checked against `data_end` right before it, with
 * offsets kept below PARSE_MAX_OFF so the verifier can bound them.
 *
 *   parse_flow(data, data_end, off, &key)  Ethernet (+ one 802.1Q tag) | IPv4 | TCP/UDP
 *                                          at `off` -> struct flow_key (other protocols:
 *                                          ports 0)
 *   find_nsh(data, data_end, &loc)         the NSH over Ethernet transport (EtherType
 *                                          0x894F) or VXLAN-GPE (IPv4, not a fragment |
 *                                          UDP dport 4790 | GPE version 0 with the P flag
 *                                          and next protocol 4),
 *                                          validated; offsets of transport, NSH and inner
 *                                          frame
 *   nsh_read_meta(data, data_end, &loc, &m) the NSH as struct nsh_meta
 */
#ifndef FUSEBOX_PARSE_H
#define FUSEBOX_PARSE_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "cbox.h"

#ifndef ETH_P_NSH
#define ETH_P_NSH 0x894F
#endif
#define ETH_P_8021Q_ 0x8100
#define VXLAN_GPE_PORT 4790
#define VXLAN_GPE_FLAG_P 0x04
#define VXLAN_GPE_VERSION 0x30
#define GPE_NP_NSH 4
#define NSH_NP_ETHERNET 3
#define NSH_BASE_LEN 8 /* base header + service path header */
#define NSH_MD1_LEN 24
#define ETH_LEN 14
#define VLAN_LEN 4
#define UDP_LEN 8
#define GPE_LEN 8
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17

/* Offsets stay below this bound (a frame's headers, not its payload). */
#define PARSE_MAX_OFF 1024

/* True when `len` bytes from `off` lie inside the frame. */
#define HAS(data, data_end, off, len) ((void *)(data) + (off) + (len) <= (void *)(data_end))

/* Where find_nsh found the NSH. */
struct nsh_loc {
	__u32 transport; /* offset of the outer (transport) Ethernet header: 0 */
	__u32 nsh; /* offset of the NSH */
	__u32 inner; /* offset of the inner frame (after the NSH) */
	__u8 vxlan; /* 1: VXLAN-GPE transport; 0: Ethernet transport */
	__u8 md_type;
	__u8 len; /* NSH length in bytes */
	__u8 next_proto; /* NSH next protocol */
};

/* Ethernet header at `off` (+ one 802.1Q tag): the EtherType (host order) and the offset of
 * what follows, or -1 when truncated. */
static __always_inline int parse_eth(void *data, void *data_end, __u32 off, __u16 *proto,
				     __u32 *next)
{
	if (off > PARSE_MAX_OFF || !HAS(data, data_end, off, ETH_LEN))
		return -1;
	__u8 *p = data + off;
	__u16 type = ((__u16)p[12] << 8) | p[13];
	off += ETH_LEN;
	if (type == ETH_P_8021Q_) {
		if (off > PARSE_MAX_OFF || !HAS(data, data_end, off, VLAN_LEN))
			return -1;
		p = data + off;
		type = ((__u16)p[2] << 8) | p[3];
		off += VLAN_LEN;
	}
	*proto = type;
	*next = off;
	return 0;
}

/* IPv4 header at `off`: the header length in bytes, or -1 when truncated or not IPv4
 * (version, IHL < 5). */
static __always_inline int parse_ipv4(void *data, void *data_end, __u32 off)
{
	if (off > PARSE_MAX_OFF || !HAS(data, data_end, off, 20))
		return -1;
	__u8 *p = data + off;
	if ((p[0] >> 4) != 4)
		return -1;
	__u32 ihl = (p[0] & 0x0f) * 4;
	if (ihl < 20 || !HAS(data, data_end, off, ihl))
		return -1;
	return ihl;
}

/* The 5-tuple of the Ethernet/IPv4 frame at `off`: 0, or -1 when the frame is not Ethernet
 * + IPv4 or is truncated. Later fragments and protocols without ports get ports 0. */
static __always_inline int parse_flow(void *data, void *data_end, __u32 off, struct flow_key *k)
{
	__u16 type;
	__u32 l3;
	if (parse_eth(data, data_end, off, &type, &l3) < 0 || type != ETH_P_IP)
		return -1;
	int ihl = parse_ipv4(data, data_end, l3);
	if (ihl < 0)
		return -1;
	__u8 *ip = data + l3;
	if (!HAS(data, data_end, l3, 20))
		return -1;
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(&k->saddr, ip + 12, 4);
	__builtin_memcpy(&k->daddr, ip + 16, 4);
	k->proto = ip[9];
	__u16 frag = (((__u16)ip[6] << 8) | ip[7]) & 0x1fff;
	if ((k->proto == IPPROTO_TCP_ || k->proto == IPPROTO_UDP_) && frag == 0) {
		__u32 l4 = l3 + (__u32)ihl;
		if (l4 > PARSE_MAX_OFF || !HAS(data, data_end, l4, 4))
			return -1;
		__u8 *t = data + l4;
		__builtin_memcpy(&k->sport, t, 2);
		__builtin_memcpy(&k->dport, t + 2, 2);
	}
	return 0;
}

/* Ethernet without a tag, IPv4 without options, up to the ports: what parse_flow_at0 reads
 * at fixed offsets. */
#define FLOW0_LEN (ETH_LEN + 20 + 4)

/* The 5-tuple of an IPv4 header without options at `ip` (its ports at ip + 20, which the
 * caller checked are there), as parse_flow gives it: ports only for TCP and UDP first
 * fragments. */
static __always_inline void flow_ipv4_fixed(const __u8 *ip, struct flow_key *k)
{
	/* Whole-word loads from the packet (a memcpy of unknown alignment is byte loads and
	 * shifts for the BPF target); the verifier lets packet loads be unaligned where the
	 * CPU handles them, and the headers here are 4-byte aligned in practice anyway. */
	__u32 *w = (__u32 *)k;
	__u8 proto = ip[9];

	w[0] = *(const __u32 *)(ip + 12);
	w[1] = *(const __u32 *)(ip + 16);
	w[2] = 0;
	w[3] = 0;
	k->proto = proto;
	if ((proto == IPPROTO_TCP_ || proto == IPPROTO_UDP_) &&
	    !(*(const __u16 *)(ip + 6) & bpf_htons(0x1fff)))
		w[2] = *(const __u32 *)(ip + 20);
}

/* The 5-tuple of the common frame at offset 0 (no VLAN tag, IPv4 without options, the ports
 * present): one bounds check and constant offsets, the 5-tuple parse_flow would give; 0, or
 * -1 for any other frame (which the caller walks with parse_flow, or leaves to its general
 * code). */
static __always_inline int parse_flow_fixed(void *data, void *data_end, struct flow_key *k)
{
	__u8 *p = data, *ip = p + ETH_LEN;

	if (!HAS(data, data_end, 0, FLOW0_LEN) || *(const __u16 *)(p + 12) != bpf_htons(ETH_P_IP) ||
	    ip[0] != 0x45)
		return -1;
	flow_ipv4_fixed(ip, k);
	return 0;
}

/* parse_flow at offset 0: parse_flow_fixed for the common frame, parse_flow for the rest. */
static __always_inline int parse_flow_at0(void *data, void *data_end, struct flow_key *k)
{
	if (parse_flow_fixed(data, data_end, k) < 0)
		return parse_flow(data, data_end, 0, k);
	return 0;
}

/*
 * Finds and validates the NSH. Returns
 *   0                    an NSH, valid, whole: `loc` filled;
 *   -1                   not NSH traffic (another EtherType, not VXLAN-GPE carrying NSH);
 *   CTR_DROP_TRUNCATED   NSH traffic whose headers are cut short;
 *   CTR_DROP_BAD_NSH     version not 0, length below 2 words, MD type 1 with a length
 *                        other than 6, MD type 2 with more context than NSH_MAX_CTX, another
 *                        MD type.
 * The checks come in wire::nsh::Packet::check_len's order (base header present, version,
 * length >= 2 words, whole header present, MD type), so both sides agree on the reason.
 */
static __always_inline int find_nsh(void *data, void *data_end, struct nsh_loc *loc)
{
	__u16 type;
	__u32 off;
	if (parse_eth(data, data_end, 0, &type, &off) < 0)
		return -1;
	loc->transport = 0;
	loc->vxlan = 0;
	if (type == ETH_P_IP) {
		int ihl = parse_ipv4(data, data_end, off);
		if (ihl < 0)
			return -1;
		__u8 *ip = data + off;
		if (!HAS(data, data_end, off, 20))
			return -1;
		/* UDP, not a fragment (no offset, no more-fragments flag) */
		if (ip[9] != IPPROTO_UDP_ || ((((__u16)ip[6] << 8) | ip[7]) & 0x3fff) != 0)
			return -1;
		off += (__u32)ihl;
		if (off > PARSE_MAX_OFF || !HAS(data, data_end, off, 4))
			return -1;
		__u8 *udp = data + off;
		if ((((__u16)udp[2] << 8) | udp[3]) != VXLAN_GPE_PORT)
			return -1;
		if (!HAS(data, data_end, off, UDP_LEN + GPE_LEN))
			return CTR_DROP_TRUNCATED;
		__u8 *gpe = data + off + UDP_LEN;
		if (!(gpe[0] & VXLAN_GPE_FLAG_P) || (gpe[0] & VXLAN_GPE_VERSION) ||
		    gpe[3] != GPE_NP_NSH)
			return -1;
		off += UDP_LEN + GPE_LEN;
		loc->vxlan = 1;
	} else if (type != ETH_P_NSH) {
		return -1;
	}
	if (off > PARSE_MAX_OFF)
		return CTR_DROP_TRUNCATED;
	if (!HAS(data, data_end, off, NSH_BASE_LEN))
		return CTR_DROP_TRUNCATED;
	__u8 *n = data + off;
	if ((n[0] >> 6) != 0)
		return CTR_DROP_BAD_NSH;
	__u32 len = (n[1] & 0x3f) * 4;
	__u8 md = n[2] & 0x0f;
	/* In the order wire::nsh::Packet::check_len checks: length below the base header,
	 * then the whole header present, then what the MD type allows. */
	if (len < NSH_BASE_LEN)
		return CTR_DROP_BAD_NSH;
	if (!HAS(data, data_end, off, len))
		return CTR_DROP_TRUNCATED;
	if (md == 1) {
		if (len != NSH_MD1_LEN)
			return CTR_DROP_BAD_NSH;
	} else if (md == 2) {
		if (len > NSH_BASE_LEN + NSH_MAX_CTX)
			return CTR_DROP_BAD_NSH;
	} else {
		return CTR_DROP_BAD_NSH;
	}
	loc->nsh = off;
	loc->inner = off + len;
	loc->md_type = md;
	loc->len = len;
	loc->next_proto = n[3];
	return 0;
}

/* The NSH found by find_nsh as a struct nsh_meta (flags 0, unused context bytes 0):
 * 0, or -1 if the frame changed under us (cannot happen after find_nsh said 0). */
static __always_inline int nsh_read_meta(void *data, void *data_end, const struct nsh_loc *loc,
					 struct nsh_meta *m)
{
	__u32 off = loc->nsh;
	__builtin_memset(m, 0, sizeof(*m));
	if (off > PARSE_MAX_OFF || !HAS(data, data_end, off, NSH_BASE_LEN))
		return -1;
	__u8 *n = data + off;
	m->ttl = ((n[0] & 0x0f) << 2) | (n[1] >> 6);
	m->md_type = loc->md_type;
	m->sph = ((__u32)n[4] << 24) | ((__u32)n[5] << 16) | ((__u32)n[6] << 8) | n[7];
	__u32 ctx_len = loc->len - NSH_BASE_LEN;
	if (ctx_len > NSH_MAX_CTX)
		return -1;
	m->ctx_len = ctx_len;
	off += NSH_BASE_LEN;
#pragma unroll
	for (int i = 0; i < NSH_MAX_CTX / 4; i++) {
		if ((__u32)i * 4 >= ctx_len)
			break;
		__u8 *w = (__u8 *)data + off + i * 4;
		/* a fresh, bounds-checked pointer per word: keeps clang from reusing one
		 * checked in another iteration */
		asm volatile("" : "+r"(w));
		if ((void *)(w + 4) > data_end)
			return -1;
		__builtin_memcpy(&m->ctx[i * 4], w, 4);
	}
	return 0;
}

/* The TTL of NSH record `m`: 0 in an entry means 63. */
static __always_inline __u8 meta_ttl(const struct nsh_meta *m)
{
	return m->ttl ? m->ttl & 0x3f : 63;
}

/* nsh_write_base with TTL `ttl` (1..63) in place of `m`'s. */
static __always_inline __u32 nsh_write_base_ttl(__u8 *out, const struct nsh_meta *m, __u32 ttl)
{
	__u32 len = NSH_BASE_LEN + (m->md_type == 1 ? 16 : (m->ctx_len & 0x3c));
	/* version 0, O 0, U 0, TTL, length in words, MD type, next protocol */
	__u32 w0 = ((ttl >> 2) & 0x0f) << 24 | (((ttl & 0x3) << 6) | ((len / 4) & 0x3f)) << 16 |
		   (__u32)(m->md_type & 0x0f) << 8 | NSH_NP_ETHERNET;

	*(__u32 *)out = bpf_htonl(w0);
	*(__u32 *)(out + 4) = bpf_htonl(m->sph);
	return len;
}

/* Writes the 8-byte NSH base header + service path header of `m` (next protocol Ethernet)
 * into `out`, in two 32-bit stores (`out`: packet data, or 4-byte aligned on the stack, where
 * the verifier refuses misaligned stores); TTL 0 in `m` means 63. Returns the NSH length
 * (8 + context). */
static __always_inline __u32 nsh_write_base(__u8 *out, const struct nsh_meta *m)
{
	return nsh_write_base_ttl(out, m, meta_ttl(m));
}

/* Writes the MD type 2 context of `m` (`clen` bytes, a multiple of 4) after an outer Ethernet
 * header and an NSH base header at the start of the frame [data, data_end), word by word, each
 * word's place bounds-checked. Returns 0, or -1 when the frame ends before the context. */
static __always_inline int nsh_write_md2_ctx(void *data, void *data_end, const struct nsh_meta *m,
					     __u32 clen)
{
#pragma unroll
	for (int i = 0; i < NSH_MAX_CTX / 4; i++) {
		if ((__u32)i * 4 >= clen)
			break;
		__u8 *w = (__u8 *)data + ETH_LEN + NSH_BASE_LEN + i * 4;
		asm volatile("" : "+r"(w)); /* a fresh, bounds-checked pointer per word */
		if ((void *)(w + 4) > data_end)
			return -1;
		*(__u32 *)w = *(const __u32 *)&m->ctx[i * 4];
	}
	return 0;
}

/* Copies a 6-byte MAC address in three 16-bit moves (packet data, or 2-byte aligned). */
static __always_inline void mac_copy(__u8 *dst, const __u8 *src)
{
	__u16 *d = (__u16 *)dst;
	const __u16 *s = (const __u16 *)src;

	d[0] = s[0];
	d[1] = s[1];
	d[2] = s[2];
}

#endif
