/* The inputs kgate-device draws on the GPU are the host's, bit for bit: every class of every dtype
 * at shapes that end mid-block and mid-row and at a gigabyte-class one, drawn by the real keeper's
 * kernel (a START of one GEN range, read back through END's snapshot) and by the host's fill
 * (verifier/inputs.c), compared; and END's comparison of the inputs on the device leaves the host
 * arena's copy alone when they are as staged. Exits 77 (skipped) without a driver; with --require,
 * a keeper without its kernels fails. Usage: gpu-gen_exact [--require] [KGATE-DEVICE] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/keeper.h"
#include "verifier/dtype.h"
#include "verifier/inputs.h"

#define ARENA ((size_t)288 << 20)

static int failures;

static void fail(const char *fmt, const char *a, const char *b, long long i)
{
	fprintf(stderr, "FAIL ");
	fprintf(stderr, fmt, a, b, i);
	fputc('\n', stderr);
	failures++;
}

/* one draw on the device and on the host, compared */
static int one(struct kg_keeper *k, int slot, unsigned char *host, unsigned char *mine, kg_dtype dt,
	       enum kg_input_class c, const int64_t *shape, int ndim, const kg_key *key)
{
	size_t n = 1, es = kg_dtype_size(dt);
	for (int d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	size_t bytes = n * es;
	if (bytes > ARENA)
		return -1;
	struct kg_keeper_stage st = {.n = 1, .range = {{.off = 0, .bytes = bytes, .kind = KG_DEV_R_GEN}}};
	kg_inputs_params(&st.range[0].gen, dt, n, shape, ndim, KG_ROLE_ACTIVATION, c, KG_CLASS_ALL, key, 3);
	memcpy(st.key, key->w, sizeof(st.key));
	kg_error e = {0};
	uint64_t t0, t1, copy;
	uint32_t ins;
	memset(host, 0xab, bytes);
	if (kg_keeper_begin(k, slot, bytes, 0, &st, &t0, &e) ||
	    kg_keeper_end(k, slot, bytes, 0, bytes, 0, &t1, &copy, &ins, &e)) {
		fail("%s %s: the keeper failed (%lld)", kg_class_name(c), e.msg, 0);
		return -1;
	}
	kg_inputs_fill_tensor(mine, &st.range[0].gen, key);
	if (memcmp(host, mine, bytes)) {
		size_t i = 0;
		while (!memcmp(host + i * es, mine + i * es, es))
			i++;
		fprintf(stderr, "  element %zu: device %.17g, host %.17g\n", i, kg_load(host, dt, i), kg_load(mine, dt, i));
		fail("%s %s: the device's draw differs from the host's, first at element %lld", kg_class_name(c),
		     kg_dtype_name(dt), (long long)i);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int require = argc > 1 && !strcmp(argv[1], "--require");
	const char *dev = argc > 1 + require ? argv[1 + require] : "build/kgate-device";
	struct kg_keeper k;
	kg_error e = {0};
	if (kg_keeper_start(&k, dev, &e)) {
		printf("SKIP: no device keeper here: %s\n", e.msg);
		kg_keeper_stop(&k);
		return 77;
	}
	if ((k.caps & (KG_DEV_CAP_GEN | KG_DEV_CAP_CMP)) != (KG_DEV_CAP_GEN | KG_DEV_CAP_CMP)) {
		printf("%s: kgate-device has no kernels (built without nvcc)\n", require ? "FAIL" : "SKIP");
		kg_keeper_stop(&k);
		return require ? 1 : 77;
	}
	int fd = memfd_create("gen-exact", MFD_CLOEXEC);
	unsigned char *host = NULL, *mine = malloc(ARENA);
	if (fd < 0 || ftruncate(fd, (off_t)ARENA) ||
	    (host = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED || !mine) {
		perror("gen-exact: arena");
		return 1;
	}
	int slot, dfd;
	size_t dbytes;
	if (kg_keeper_attach(&k, fd, ARENA, &slot, &dfd, &dbytes, &e)) {
		fprintf(stderr, "FAIL attach: %s\n", e.msg);
		return 1;
	}
	close(dfd); /* no runner here: the mirror is the keeper's alone */
	kg_key key = {{0x01234567, 0x89abcdef, 7, 8, 9, 10, 11, 12}};
	const kg_dtype dts[] = {KG_F32, KG_F16, KG_BF16, KG_I32, KG_I64, KG_U8};
	const int64_t small[3] = {3, 37, 37}, rows[2] = {1000, 1031};
	int draws = 0;
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (int c = 0; c < KG_CLASS_COUNT_; c++) {
			draws += !one(&k, slot, host, mine, dts[d], (enum kg_input_class)c, small, 3, &key);
			draws += !one(&k, slot, host, mine, dts[d], (enum kg_input_class)c, rows, 2, &key);
		}
	/* softmax's nominal rows, a quarter of them: 256 MiB of fp32 */
	const int64_t big[2] = {1024, 65536};
	const enum kg_input_class bigc[] = {KG_CLASS_NORMAL, KG_CLASS_SPIKED, KG_CLASS_MIXED, KG_CLASS_TINY};
	for (size_t i = 0; i < sizeof(bigc) / sizeof(bigc[0]); i++)
		draws += !one(&k, slot, host, mine, KG_F32, bigc[i], big, 2, &key);
	/* END's look at the inputs: drawn on the device, as staged, so the host arena's stays as it was */
	const size_t in_bytes = 4u << 20, out_bytes = 1u << 20;
	struct kg_keeper_stage st = {
		.n = 2,
		.range = {{.off = 0, .bytes = in_bytes, .kind = KG_DEV_R_GEN},
			  {.off = in_bytes, .bytes = out_bytes, .pattern = 0x7fc00001u, .kind = KG_DEV_R_FILL, .elem = 4}}};
	int64_t ishape[1] = {(int64_t)(in_bytes / 4)};
	kg_inputs_params(&st.range[0].gen, KG_F32, in_bytes / 4, ishape, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 0, &key, 0);
	memcpy(st.key, key.w, sizeof(st.key));
	memset(host, 0xab, in_bytes + out_bytes);
	uint64_t t0, t1, copy;
	uint32_t ins = 0;
	if (kg_keeper_begin(&k, slot, in_bytes + out_bytes, 1, &st, &t0, &e) ||
	    kg_keeper_end(&k, slot, in_bytes + out_bytes, in_bytes, in_bytes + out_bytes, in_bytes, &t1, &copy, &ins, &e))
		fail("%s%s the compare call failed: %lld", e.msg, "", 0);
	else if (ins != KG_DEV_IN_SAME)
		fail("END found the inputs %s%s (state %lld), not as staged", "changed", "", (long long)ins);
	else if (host[0] != 0xab || host[in_bytes - 1] != 0xab)
		fail("END sent the inputs back %s%s (%lld)", "though", " they were as staged", 0);
	else {
		uint32_t w;
		memcpy(&w, host + in_bytes, 4);
		if (w != 0x7fc00001u)
			fail("END did not send the outputs %s%s (%lld)", "", "", 0);
	}
	kg_keeper_stop(&k);
	printf("%d draws compared, %d failures\n", draws, failures);
	return failures ? 1 : 0;
}
