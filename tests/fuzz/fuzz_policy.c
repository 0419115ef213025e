/* Fuzz harness: policies (policy/policy.c over common/kg_yaml.c and its limits). Each input is
 * written as a policy file in a scratch directory and loaded. */
#include <stdlib.h>
#include <unistd.h>

#define FUZZ_NAME "policy"
#include "tests/fuzz/fuzz_main.h"
#include "policy/policy.h"

static char dir[64] = "";
static char path[128];
static struct kg_policy *pol;

static void cleanup(void)
{
	if (dir[0])
		kg_rmtree(dir);
}

static void fuzz_setup(void)
{
	snprintf(dir, sizeof(dir), "%s/kgate-fuzz-policy-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(path, sizeof(path), "%s/policy.yaml", dir);
	pol = malloc(sizeof(*pol));
	if (!pol)
		abort();
}

static void fuzz_one(const uint8_t *data, size_t len)
{
	kg_error e = {0};
	if (kg_write_file(path, data, len, 0644, &e))
		abort();
	kg_policy_load(path, pol, &e);
}
