// SPDX-License-Identifier: Apache-2.0
/* Fwd (Chaining-Box §5.2.3): TC, egress after Enc or ingress; see encfwd.h. */
#include "encfwd.h"

SEC("tc")
int fwd(struct __sk_buff *skb)
{
	return fwd_run(skb);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
