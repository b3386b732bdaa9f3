// SPDX-License-Identifier: Apache-2.0
/* Enc and Fwd in one program, one parse (Chaining-Box §5.2.2's suggestion); see encfwd.h. */
#include "encfwd.h"

SEC("tc")
int enc_fwd(struct __sk_buff *skb)
{
	return enc_fwd_run(skb);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
