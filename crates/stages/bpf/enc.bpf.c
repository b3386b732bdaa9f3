// SPDX-License-Identifier: Apache-2.0
/* Enc (Chaining-Box §5.2.2): TC egress after an NSH-unaware SF; see encfwd.h. */
#include "encfwd.h"

SEC("tc")
int enc(struct __sk_buff *skb)
{
	return enc_run(skb);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
