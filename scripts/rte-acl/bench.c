/*
 * rte-acl-bench: DPDK's rte_acl on a ClassBench filter set and header trace, every
 * classify algorithm this CPU and DPDK build support, through DPDK's public API only.
 *
 *   rte-acl-bench RULES TRACE [PASSES]
 *
 * RULES: a ClassBench filter set (`@SRC/LEN DST/LEN SPLO : SPHI DPLO : DPHI 0xPP/0xMM ...`,
 * highest priority first); TRACE: one header per line, at least five unsigned integers
 * (src dst sport dport proto, as in ClassBench traces; `fusebox classify --write-trace`
 * writes drawn headers in this form). The flags column is ignored, as FuseBox does.
 *
 * Each algorithm classifies every header PASSES times (default 10) in batches of 64, the
 * batch size of `fusebox classify`. Output, one line per algorithm, for
 * `fusebox classify --rte-acl` to read:
 *
 *   alg=NAME rate=MLOOKUPS_PER_S best=FASTEST_PASS cpu=FASTEST_PASS_BY_CPU_TIME digest=0xHEX
 *
 * RATE is over all passes by the wall clock; BEST the fastest pass by the wall clock; CPU
 * the fastest pass by the thread's CPU time (CLOCK_THREAD_CPUTIME_ID: time the thread was
 * descheduled on a busy machine does not count), all in millions of lookups per second.
 * DIGEST is FNV-1a (64 bit) over the answers, each as a little-endian i64: the 0-based index
 * of the first matching rule, -1 for none (`fusebox classify` computes the same over its
 * own answers). Before those: `rules=N headers=M build_s=SECONDS`. Errors go to stderr
 * with exit status 1. Built and run by scripts/rte-acl/run.sh, outside CI.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <rte_eal.h>
#include <rte_acl.h>

enum { F_PROTO, F_SRC, F_DST, F_SPORT, F_DPORT, NUM_FIELDS };
enum { BATCH = 64 };

/* The input layout: a one-byte first field (rte_acl reads the first byte on its own and
 * the rest in groups of four), then the addresses, then both ports in one group. All in
 * network byte order. */
struct key {
	uint8_t proto;
	uint8_t pad[3];
	uint32_t src;
	uint32_t dst;
	uint16_t sport;
	uint16_t dport;
};

RTE_ACL_RULE_DEF(acl5_rule, NUM_FIELDS);

static double clock_s(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

static void die(const char *what)
{
	fprintf(stderr, "rte-acl-bench: %s\n", what);
	exit(1);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "rte-acl-bench: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc(n + 1);
	if (!s || fread(s, 1, n, f) != (size_t)n)
		die("cannot read a file");
	s[n] = 0;
	fclose(f);
	return s;
}

/* One ClassBench rule line into r; 0 on success. */
static int parse_rule(const char *line, struct acl5_rule *r)
{
	unsigned a[4], b[4], sl, dl, splo, sphi, dplo, dphi, pv, pm;
	if (sscanf(line, "@%u.%u.%u.%u/%u %u.%u.%u.%u/%u %u : %u %u : %u %x/%x", &a[0], &a[1],
		   &a[2], &a[3], &sl, &b[0], &b[1], &b[2], &b[3], &dl, &splo, &sphi, &dplo,
		   &dphi, &pv, &pm) != 16)
		return -1;
	if (sl > 32 || dl > 32 || splo > sphi || sphi > 65535 || dplo > dphi || dphi > 65535)
		return -1;
	uint32_t src = a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3];
	uint32_t dst = b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
	memset(r, 0, sizeof(*r));
	r->field[F_PROTO].value.u8 = pm ? pv : 0;
	r->field[F_PROTO].mask_range.u8 = pm ? 0xff : 0;
	r->field[F_SRC].value.u32 = sl ? src & (uint32_t)(~0u << (32 - sl)) : 0;
	r->field[F_SRC].mask_range.u32 = sl;
	r->field[F_DST].value.u32 = dl ? dst & (uint32_t)(~0u << (32 - dl)) : 0;
	r->field[F_DST].mask_range.u32 = dl;
	r->field[F_SPORT].value.u16 = splo;
	r->field[F_SPORT].mask_range.u16 = sphi;
	r->field[F_DPORT].value.u16 = dplo;
	r->field[F_DPORT].mask_range.u16 = dphi;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		die("usage: rte-acl-bench RULES TRACE [PASSES]");
	int passes = argc > 3 ? atoi(argv[3]) : 10;
	if (passes < 1)
		passes = 1;

	/* EAL (rte_acl allocates through it): no hugepages, no devices, one core, no files
	 * shared with other processes, AVX-512 allowed. RTE_ACL_EAL_ARGS (space-separated)
	 * replaces these, e.g. to give rte_acl hugepages where the machine has them. */
	char *eal[32] = {"rte-acl-bench", "--no-huge", "--no-pci", "--no-shconf", "-m", "2048",
			 "-l", "0", "--log-level", "*:error", "--no-telemetry",
			 "--force-max-simd-bitwidth=512"};
	int neal = 12;
	char *env = getenv("RTE_ACL_EAL_ARGS");
	if (env) {
		neal = 1;
		for (char *w = strtok(strdup(env), " "); w && neal < 32; w = strtok(NULL, " "))
			eal[neal++] = w;
	}
	if (rte_eal_init(neal, eal) < 0)
		die("rte_eal_init failed");

	/* Rules. */
	char *text = slurp(argv[1]);
	size_t cap = 1024, n = 0;
	struct acl5_rule *rules = malloc(cap * sizeof(*rules));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[strspn(line, " \t\r")] == 0)
			continue;
		if (n == cap && !(rules = realloc(rules, (cap *= 2) * sizeof(*rules))))
			die("out of memory");
		if (parse_rule(line, &rules[n]) != 0) {
			fprintf(stderr, "rte-acl-bench: %s: rule %zu does not parse\n", argv[1], n + 1);
			return 1;
		}
		/* First match: earlier rules get higher priority; userdata is index + 1 (0 is
		 * rte_acl's "no match"). */
		rules[n].data.category_mask = 1;
		rules[n].data.priority = RTE_ACL_MAX_PRIORITY - (int32_t)n;
		rules[n].data.userdata = (uint32_t)n + 1;
		n++;
	}
	free(text);

	/* Headers. */
	text = slurp(argv[2]);
	size_t hcap = 1 << 16, h = 0;
	struct key *keys = malloc(hcap * sizeof(*keys));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long v[5];
		if (line[strspn(line, " \t\r")] == 0)
			continue;
		if (sscanf(line, "%lu %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5) {
			fprintf(stderr, "rte-acl-bench: %s: header %zu does not parse\n", argv[2], h + 1);
			return 1;
		}
		if (h == hcap && !(keys = realloc(keys, (hcap *= 2) * sizeof(*keys))))
			die("out of memory");
		memset(&keys[h], 0, sizeof(keys[h]));
		keys[h].proto = (uint8_t)v[4];
		keys[h].src = htonl((uint32_t)v[0]);
		keys[h].dst = htonl((uint32_t)v[1]);
		keys[h].sport = htons((uint16_t)v[2]);
		keys[h].dport = htons((uint16_t)v[3]);
		h++;
	}
	free(text);
	const uint8_t **data = malloc(h * sizeof(*data));
	uint32_t *res = malloc(h * sizeof(*res));
	if (!data || !res)
		die("out of memory");
	for (size_t i = 0; i < h; i++)
		data[i] = (const uint8_t *)&keys[i];

	struct rte_acl_param prm = {
		.name = "fusebox-bench",
		.socket_id = 0,
		.rule_size = RTE_ACL_RULE_SZ(NUM_FIELDS),
		.max_rule_num = (uint32_t)n,
	};
	struct rte_acl_ctx *ctx = rte_acl_create(&prm);
	if (!ctx)
		die("rte_acl_create failed");
	if (n && rte_acl_add_rules(ctx, (const struct rte_acl_rule *)rules, (uint32_t)n) != 0)
		die("rte_acl_add_rules failed");
	struct rte_acl_config cfg = {
		.num_categories = 1,
		.num_fields = NUM_FIELDS,
		.defs = {
			{RTE_ACL_FIELD_TYPE_BITMASK, 1, F_PROTO, 0, offsetof(struct key, proto)},
			{RTE_ACL_FIELD_TYPE_MASK, 4, F_SRC, 1, offsetof(struct key, src)},
			{RTE_ACL_FIELD_TYPE_MASK, 4, F_DST, 2, offsetof(struct key, dst)},
			{RTE_ACL_FIELD_TYPE_RANGE, 2, F_SPORT, 3, offsetof(struct key, sport)},
			{RTE_ACL_FIELD_TYPE_RANGE, 2, F_DPORT, 3, offsetof(struct key, dport)},
		},
		.max_size = 0,
	};
	double t0 = now();
	if (rte_acl_build(ctx, &cfg) != 0)
		die("rte_acl_build failed");
	printf("rules=%zu headers=%zu build_s=%.3f\n", n, h, now() - t0);
	fflush(stdout);

	static const struct {
		enum rte_acl_classify_alg alg;
		const char *name;
	} algs[] = {
		{RTE_ACL_CLASSIFY_SCALAR, "scalar"},
		{RTE_ACL_CLASSIFY_SSE, "sse"},
		{RTE_ACL_CLASSIFY_AVX2, "avx2"},
		{RTE_ACL_CLASSIFY_AVX512X16, "avx512x16"},
		{RTE_ACL_CLASSIFY_AVX512X32, "avx512x32"},
		{RTE_ACL_CLASSIFY_NEON, "neon"},
		{RTE_ACL_CLASSIFY_ALTIVEC, "altivec"},
	};
	for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
		/* Skips what this CPU (or the EAL's SIMD width limit) does not allow. */
		if (rte_acl_set_ctx_classify(ctx, algs[a].alg) != 0)
			continue;
		double best = 1e30, total = 0, cpu = 1e30;
		for (int p = 0; p < passes; p++) {
			double c = clock_s(CLOCK_THREAD_CPUTIME_ID);
			double s = now();
			for (size_t i = 0; i < h; i += BATCH) {
				uint32_t m = h - i < BATCH ? (uint32_t)(h - i) : BATCH;
				rte_acl_classify(ctx, data + i, res + i, m, 1);
			}
			double d = now() - s;
			double dc = clock_s(CLOCK_THREAD_CPUTIME_ID) - c;
			if (dc > 0 && dc < cpu)
				cpu = dc;
			total += d;
			if (d < best)
				best = d;
		}
		uint64_t digest = 0xcbf29ce484222325ull;
		for (size_t i = 0; i < h; i++) {
			int64_t v = res[i] ? (int64_t)res[i] - 1 : -1;
			for (int b = 0; b < 8; b++) {
				digest ^= (uint8_t)((uint64_t)v >> (8 * b));
				digest *= 0x100000001b3ull;
			}
		}
		printf("alg=%s rate=%.3f best=%.3f cpu=%.3f digest=0x%016" PRIx64 "\n",
		       algs[a].name, h * (double)passes / total / 1e6, h / best / 1e6,
		       h / cpu / 1e6, digest);
		fflush(stdout);
	}
	rte_acl_free(ctx);
	free(rules);
	free(keys);
	free(data);
	free(res);
	rte_eal_cleanup();
	return 0;
}
