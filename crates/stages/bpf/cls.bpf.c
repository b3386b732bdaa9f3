/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls (TC ingress) at a chain's entry, alone: a classified frame leaves with zero outer
 * MACs and TC_ACT_UNSPEC, so Fwd, the next TC filter, writes the transport (cls.h).
 */
#include "cls.h"

SEC("tc")
int cls(struct __sk_buff *skb)
{
	return cls_run(skb);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
