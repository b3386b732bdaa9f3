/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls and Fwd in one program at a chain's entry (TC ingress): a classified frame is
 * forwarded at once by (SPI, 255) like Fwd would (encfwd.h); the rest passes untouched.
 */
#include "cls.h"
#include "encfwd.h"

SEC("tc")
int cls_fwd(struct __sk_buff *skb)
{
	int v = cls_run(skb);
	if (v != TC_ACT_UNSPEC)
		return v;
	return fwd_run(skb);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
