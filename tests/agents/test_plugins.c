/* Unit tests of the plugin ABI loader, the frame protocol and the agent client in both isolation
 * modes: wrong ABI major, missing symbol or entry point are refused with a clear message; a plugin
 * that crashes, hangs or writes to stdout under process isolation costs one call, not kgate.
 * This program doubles as the helper process: `agent-host` in argv[1] serves the protocol. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/plugin.h"
#include "proto/kgate.pb-c.h"

static char plugdir[4096];
static char candidate[4096];

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s.so", plugdir, name);
}

static void test_loader_good(void **state)
{
	(void)state;
	char p[4200];
	struct kg_plugin pl;
	kg_error e = {0};
	path_of(p, sizeof(p), "faulty");
	assert_int_equal(kg_plugin_load(p, &pl, &e), 0);
	assert_string_equal(pl.api->name, "faulty");
	kg_plugin_unload(&pl);
}

static void test_loader_refusals(void **state)
{
	(void)state;
	char p[4200];
	struct kg_plugin pl;
	kg_error e = {0};
	path_of(p, sizeof(p), "badmajor");
	assert_int_equal(kg_plugin_load(p, &pl, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "agent ABI 2.0"));
	assert_non_null(strstr(e.msg, "rebuild"));
	assert_null(pl.dl);

	path_of(p, sizeof(p), "nosymbol");
	assert_int_equal(kg_plugin_load(p, &pl, &e), -ENOEXEC);
	assert_non_null(strstr(e.msg, "does not export kg_agent_plugin_v1"));

	path_of(p, sizeof(p), "nopropose");
	assert_int_equal(kg_plugin_load(p, &pl, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "has no propose"));

	assert_int_equal(kg_plugin_load("/nonexistent/x.so", &pl, &e), -ENOEXEC);
	assert_non_null(strstr(e.msg, "cannot load agent plugin"));
}

static void test_check_table(void **state)
{
	(void)state;
	struct kg_agent_plugin t = {.abi_major = KG_AGENT_ABI_MAJOR, .abi_minor = 7, .struct_size = 8, .name = "x"};
	kg_error e = {0};
	assert_int_equal(kg_plugin_check(&t, "p", &e), -EPROTO);
	assert_non_null(strstr(e.msg, "bytes"));
	t.struct_size = sizeof(t);
	assert_int_equal(kg_plugin_check(&t, "p", &e), -EPROTO);
	assert_non_null(strstr(e.msg, "has no create"));
	assert_int_equal(kg_plugin_check(NULL, "p", &e), -EINVAL);
}

static void test_resolve(void **state)
{
	(void)state;
	char out[4096];
	kg_error e = {0};
	assert_int_equal(kg_plugin_resolve("../etc/passwd", out, sizeof(out), &e), -ENOENT);
	assert_int_equal(kg_plugin_resolve("no-such-agent", out, sizeof(out), &e), -ENOENT);
	assert_non_null(strstr(e.msg, "no-such-agent.so"));
	assert_int_equal(kg_plugin_resolve("bad name!", out, sizeof(out), &e), -EINVAL);
	setenv("KGATE_PLUGINDIR", plugdir, 1);
	assert_int_equal(kg_plugin_resolve("faulty", out, sizeof(out), &e), 0);
	assert_non_null(strstr(out, "faulty.so"));
	unsetenv("KGATE_PLUGINDIR");
	/* the built-in ones, found in the build tree next to this program */
	assert_int_equal(kg_plugin_resolve("replay", out, sizeof(out), &e), 0);
}

static void test_frames(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	kg_error e = {0};
	uint8_t *buf;
	size_t len;
	assert_int_equal(kg_frame_write(sv[0], "hello", 5, &e), 0);
	assert_int_equal(kg_frame_write(sv[0], "", 0, &e), 0);
	assert_int_equal(kg_frame_read(sv[1], 100, 1000, &buf, &len, &e), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(buf, "hello", 5);
	free(buf);
	assert_int_equal(kg_frame_read(sv[1], 100, 1000, &buf, &len, &e), 0);
	assert_int_equal(len, 0);
	free(buf);
	/* too large for the reader: refused before anything is allocated */
	assert_int_equal(kg_frame_write(sv[0], "0123456789", 10, &e), 0);
	assert_int_equal(kg_frame_read(sv[1], 4, 1000, &buf, &len, &e), -EMSGSIZE);
	/* a header promising 4 GiB */
	unsigned char hdr[4] = {0xff, 0xff, 0xff, 0xff};
	assert_int_equal(write(sv[0], hdr, 4), 4);
	assert_int_equal(kg_frame_read(sv[1], KG_AGENT_MAX_FRAME, 1000, &buf, &len, &e), -EMSGSIZE);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* nothing comes: the deadline holds */
	assert_int_equal(kg_frame_read(sv[1], 100, 200, &buf, &len, &e), -ETIMEDOUT);
	/* the peer goes away: EPIPE, and writing to it raises no SIGPIPE */
	close(sv[0]);
	assert_int_equal(kg_frame_read(sv[1], 100, 1000, &buf, &len, &e), -EPIPE);
	assert_int_equal(kg_frame_write(sv[1], "x", 1, &e), -EPIPE);
	close(sv[1]);
}

/* A config with the given settings, packed. */
static uint8_t *config(size_t *len, int n, const char *const *kv)
{
	Kgate__V1__AgentConfig c = KGATE__V1__AGENT_CONFIG__INIT;
	Kgate__V1__Setting s[8], *ps[8];
	for (int i = 0; i < n; i++) {
		kgate__v1__setting__init(&s[i]);
		s[i].key = (char *)kv[2 * i];
		s[i].value = (char *)kv[2 * i + 1];
		ps[i] = &s[i];
	}
	c.n_settings = (size_t)n;
	c.settings = ps;
	*len = kgate__v1__agent_config__get_packed_size(&c);
	uint8_t *b = malloc(*len + 1);
	kgate__v1__agent_config__pack(&c, b);
	return b;
}

static int propose_round(struct kg_agent *a, unsigned round, Kgate__V1__ProposeResponse **out, kg_error *e)
{
	Kgate__V1__ProposeRequest r = KGATE__V1__PROPOSE_REQUEST__INIT;
	r.round = round;
	size_t len = kgate__v1__propose_request__get_packed_size(&r);
	uint8_t req[64], *resp;
	size_t resp_len;
	kgate__v1__propose_request__pack(&r, req);
	int rc = kg_agent_propose(a, req, len, &resp, &resp_len, e);
	if (rc)
		return rc;
	*out = kgate__v1__propose_response__unpack(NULL, resp_len, resp);
	free(resp);
	return *out ? 0 : -EBADMSG;
}

static void run_faults(enum kg_agent_isolation iso)
{
	char p[4200];
	path_of(p, sizeof(p), "faulty");
	const char *kv[] = {"candidate", candidate, "crash_rounds", "2", "hang_rounds", "3", "fail_rounds", "4",
			    "stdout_noise", "1"};
	size_t clen;
	uint8_t *cfg = config(&clen, iso == KG_AGENT_PROCESS ? 5 : 1, kv);
	struct kg_agent_opts o = {.plugin = p, .isolation = iso, .timeout_s = 2, .config = cfg, .config_len = clen};
	struct kg_agent *a = NULL;
	kg_error e = {0};
	assert_int_equal(kg_agent_open(&o, &a, &e), 0);
	assert_string_equal(kg_agent_name(a), "faulty");
	Kgate__V1__ProposeResponse *r = NULL;
	assert_int_equal(propose_round(a, 1, &r, &e), 0);
	assert_int_equal(r->n_candidates, 1);
	assert_non_null(strstr(r->candidates[0]->source, "kg_forward"));
	kgate__v1__propose_response__free_unpacked(r, NULL);
	if (iso == KG_AGENT_PROCESS) {
		/* round 2: SIGSEGV in the plugin, reported; round 3: hangs, killed at the deadline */
		assert_int_equal(propose_round(a, 2, &r, &e), -ECHILD);
		assert_non_null(strstr(e.msg, "SIGSEGV"));
		uint64_t t0 = kg_now_ns();
		assert_int_equal(propose_round(a, 3, &r, &e), -ETIMEDOUT);
		assert_true(kg_now_ns() - t0 < 10000000000ull);
		assert_non_null(strstr(e.msg, "did not answer within 2 s"));
		/* round 4: the plugin's own error; round 5: a fresh helper works again */
		assert_int_equal(propose_round(a, 4, &r, &e), -EIO);
		assert_non_null(strstr(e.msg, "told to fail"));
		assert_int_equal(propose_round(a, 5, &r, &e), 0);
		assert_non_null(strstr(r->log, "round 5"));
		kgate__v1__propose_response__free_unpacked(r, NULL);
	}
	kg_agent_close(a);
	free(cfg);
}

static void test_client_inproc(void **state)
{
	(void)state;
	run_faults(KG_AGENT_INPROC);
}

static void test_client_process(void **state)
{
	(void)state;
	run_faults(KG_AGENT_PROCESS);
}

static void test_client_open_errors(void **state)
{
	(void)state;
	char p[4200];
	const char *kv[] = {"fail_create", "1"};
	size_t clen;
	uint8_t *cfg = config(&clen, 1, kv);
	struct kg_agent *a = NULL;
	kg_error e = {0};
	for (int iso = 0; iso < 2; iso++) {
		path_of(p, sizeof(p), "faulty");
		struct kg_agent_opts o = {.plugin = p, .isolation = iso, .config = cfg, .config_len = clen};
		assert_int_equal(kg_agent_open(&o, &a, &e), -EINVAL);
		assert_non_null(strstr(e.msg, "told to fail in create"));
		assert_null(a);
		/* the helper reports why the plugin did not load */
		path_of(p, sizeof(p), "badmajor");
		o.plugin = p;
		assert_int_equal(kg_agent_open(&o, &a, &e), -EPROTO);
		assert_non_null(strstr(e.msg, "agent ABI"));
	}
	/* a helper binary that does not exist */
	path_of(p, sizeof(p), "faulty");
	struct kg_agent_opts o = {.plugin = p, .host_exe = "/nonexistent/kgate", .config = cfg, .config_len = 0};
	assert_int_equal(kg_agent_open(&o, &a, &e), -ECHILD);
	assert_non_null(strstr(e.msg, "status 127"));
	free(cfg);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "agent-host"))
		return kg_agent_host_main(argc - 1, argv + 1);
	char exe[4096], dir[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	kg_dirname(exe, dir, sizeof(dir));
	snprintf(plugdir, sizeof(plugdir), "%s/../plugins", dir);
	const char *home = getenv("KGATE_HOME");
	snprintf(candidate, sizeof(candidate), "%s/examples/softmax/online.c", home && *home ? home : ".");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loader_good),	   cmocka_unit_test(test_loader_refusals),
		cmocka_unit_test(test_check_table),	   cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_frames),		   cmocka_unit_test(test_client_inproc),
		cmocka_unit_test(test_client_process), cmocka_unit_test(test_client_open_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
