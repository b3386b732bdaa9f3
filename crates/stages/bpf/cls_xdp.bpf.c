/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cls at XDP at a chain's entry, alone: a classified frame goes up (XDP_PASS) with zero outer
 * MACs and the NSH, so Fwd at TC ingress writes the transport (cls.h, cls_xdp_run).
 */
#include "cls.h"

SEC("xdp")
int cls_xdp(struct xdp_md *ctx)
{
	return cls_xdp_run(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
