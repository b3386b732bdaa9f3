/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TEMPORARY: the flow and NSH parsing Enc and Fwd need, until the shared parse.h lands
 * (then this file goes and encfwd.h includes parse.h).
 */
#ifndef FUSEBOX_ENCFWD_PARSE_H
#define FUSEBOX_ENCFWD_PARSE_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include "cbox.h"

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_NSH 0x894F
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define NSH_BASE_LEN 8
#define NSH_MD1 1
#define NSH_MD2 2
#define NSH_MD1_CTX 16
#define NSH_NP_ETHERNET 3
#define VXLAN_GPE_PORT 4790
#define GPE_NP_NSH 4

/* The 5-tuple of the Ethernet + IPv4 frame at `off` into [data, end): 0, or -1 when it is
 * not one. */
static __always_inline int flow_parse(void *data, void *end, __u32 off, struct flow_key *k)
{
	__u8 *p, *ip, *l4;
	__u32 ihl;

	if (off > 512)
		return -1;
	p = (__u8 *)data + off;
	ip = p + ETH_HLEN;
	if ((void *)(ip + 20) > end)
		return -1;
	if (*(__be16 *)(p + 12) != bpf_htons(ETH_P_IP) || (ip[0] >> 4) != 4)
		return -1;
	ihl = (ip[0] & 0xf) * 4;
	if (ihl < 20)
		return -1;
	k->saddr = *(__be32 *)(ip + 12);
	k->daddr = *(__be32 *)(ip + 16);
	k->proto = ip[9];
	k->sport = 0;
	k->dport = 0;
	if ((k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP) &&
	    !(*(__be16 *)(ip + 6) & bpf_htons(0x1fff))) {
		l4 = ip + ihl;
		if ((void *)(l4 + 4) > end)
			return -1;
		k->sport = *(__be16 *)l4;
		k->dport = *(__be16 *)(l4 + 2);
	}
	return 0;
}

/* An NSH found by nsh_parse. */
struct nsh_loc {
	__u32 off; /* where the NSH starts */
	__u32 len; /* its length in bytes */
	__u32 sph; /* SPI << 8 | SI */
	__u8 ttl;
	__u8 b0, b1; /* its first two bytes (version, O, U, TTL, length) */
	__u8 md_type;
	__u8 next_proto;
	__u8 gpe; /* 1: over VXLAN-GPE; 0: over Ethernet */
};

#define NSH_OK 0
#define NSH_NONE 1 /* no NSH: not this stage's traffic */
#define NSH_TRUNCATED 2
#define NSH_BAD 3

/* Finds the NSH of the frame in [data, end) over Ethernet (EtherType 0x894F) or VXLAN-GPE
 * (IPv4, UDP port 4790, P flag, next protocol NSH). */
static __always_inline int nsh_parse(void *data, void *end, struct nsh_loc *n)
{
	__u8 *p = data, *ip, *udp, *gpe, *nsh;
	__u32 ihl, words;

	if ((void *)(p + ETH_HLEN) > end)
		return NSH_NONE;
	if (*(__be16 *)(p + 12) == bpf_htons(ETH_P_NSH)) {
		nsh = p + ETH_HLEN;
		n->gpe = 0;
	} else if (*(__be16 *)(p + 12) == bpf_htons(ETH_P_IP)) {
		ip = p + ETH_HLEN;
		if ((void *)(ip + 20) > end || (ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP ||
		    (*(__be16 *)(ip + 6) & bpf_htons(0x3fff)))
			return NSH_NONE;
		ihl = (ip[0] & 0xf) * 4;
		if (ihl < 20)
			return NSH_NONE;
		udp = ip + ihl;
		if ((void *)(udp + 8) > end || *(__be16 *)(udp + 2) != bpf_htons(VXLAN_GPE_PORT))
			return NSH_NONE;
		gpe = udp + 8;
		if ((void *)(gpe + 8) > end)
			return NSH_TRUNCATED;
		if (!(gpe[0] & 0x04) || gpe[3] != GPE_NP_NSH)
			return NSH_NONE;
		nsh = gpe + 8;
		n->gpe = 1;
	} else {
		return NSH_NONE;
	}
	n->off = nsh - p;
	if ((void *)(nsh + NSH_BASE_LEN) > end)
		return NSH_TRUNCATED;
	n->b0 = nsh[0];
	n->b1 = nsh[1];
	n->md_type = nsh[2] & 0x0f;
	n->next_proto = nsh[3];
	n->sph = bpf_ntohl(*(__be32 *)(nsh + 4));
	n->ttl = (nsh[0] & 0x0f) << 2 | nsh[1] >> 6;
	words = nsh[1] & 0x3f;
	if ((nsh[0] >> 6) != 0)
		return NSH_BAD;
	if (n->md_type == NSH_MD1) {
		if (words != 6)
			return NSH_BAD;
	} else if (n->md_type == NSH_MD2) {
		if (words < 2)
			return NSH_BAD;
	} else {
		return NSH_BAD;
	}
	n->len = words * 4;
	if ((void *)(nsh + n->len) > end)
		return NSH_TRUNCATED;
	return NSH_OK;
}

#endif
