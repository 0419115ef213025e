/* Every setting of every CUDA example template (examples/tuner/, .cu) compiles with nvcc for sm_90a:
 * the tuner expands each one (kg_tune_source) into a scratch directory and nvcc -c builds them,
 * two at a time. No GPU is needed; without nvcc the test is skipped (exit 77). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/tuner/tune.h"

static const char *const templates[] = {"softmax.cu", "matmul.cu", "layernorm.cu", "conv_relu_pool.cu"};

int main(void)
{
	const char *home = getenv("KGATE_HOME") ? getenv("KGATE_HOME") : ".";
	const char *cuda = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
	char nvcc[4096], dir[] = "/tmp/kgate-tune-nvcc-XXXXXX", cmd[16384];
	snprintf(nvcc, sizeof(nvcc), "%s/bin/nvcc", cuda);
	if (access(nvcc, X_OK)) {
		printf("no nvcc at %s; skipped\n", nvcc);
		return 77;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	int total = 0, rc = 1;
	for (size_t t = 0; t < sizeof(templates) / sizeof(templates[0]); t++) {
		char path[4096];
		struct kg_tune_space s;
		kg_error e = {0};
		snprintf(path, sizeof(path), "%s/examples/tuner/%s", home, templates[t]);
		if (kg_tune_load(path, &s, &e)) {
			printf("FAIL %s\n", e.msg);
			goto out;
		}
		for (uint64_t i = 0; i < s.size; i++) {
			kg_tune_point pt;
			uint64_t x = i;
			memset(&pt, 0, sizeof(pt));
			for (int p = s.n - 1; p >= 0; p--) {
				pt.ix[p] = (uint8_t)(x % (uint64_t)s.p[p].n);
				x /= (uint64_t)s.p[p].n;
			}
			kg_buf b = {0};
			char out[4200];
			snprintf(out, sizeof(out), "%s/%zu-%llu.cu", dir, t, (unsigned long long)i);
			if (kg_tune_source(&s, &pt, &b) || kg_write_file(out, b.data, b.len, 0644, &e)) {
				printf("FAIL writing %s: %s\n", out, e.msg);
				kg_buf_free(&b);
				kg_tune_free(&s);
				goto out;
			}
			kg_buf_free(&b);
			total++;
		}
		printf("%s: %llu settings\n", templates[t], (unsigned long long)s.size);
		kg_tune_free(&s);
	}
	/* A failure prints its setting (the generated file's first line) and nvcc's first errors. */
	snprintf(cmd, sizeof(cmd),
		 "ls %s/*.cu | xargs -P2 -n1 sh -c '%s -arch=sm_90a -c -I%s/include \"$0\" -o \"$0.o\" >\"$0.log\" 2>&1 || "
		 "{ echo \"FAIL $(head -n1 \"$0\")\"; head -n 5 \"$0.log\"; }' >%s/result 2>&1; cat %s/result; "
		 "! grep -q FAIL %s/result",
		 dir, nvcc, home, dir, dir, dir);
	rc = system(cmd) == 0 ? 0 : 1;
	printf("%d settings compiled: %s\n", total, rc ? "FAILED" : "all ok");
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		printf("could not remove %s\n", dir);
	return rc;
}
