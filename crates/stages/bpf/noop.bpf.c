/* SPDX-License-Identifier: Apache-2.0 */
/*
 * No-op programs: the baseline the stage benchmarks subtract (the cost of BPF_PROG_TEST_RUN
 * itself). The object also declares the shared maps, so loading it creates and pins them.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "maps.h"

SEC("xdp")
int noop_xdp(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("tc")
int noop_tc(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
