/* Where kgate's own files are on this host (paths.h): its runner, kgate-device, the candidate
 * header, compute-sanitizer, the runner scripts, and the Python with torch (with what its torch
 * can do, and what its sandbox must show). Installed paths are compiled in (KG_*DIR); a build tree
 * is found next to the running binary. */
#include "verifier/plan/paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "verifier/plan/gpu.h"

/* Looks for `probe` (relative to each candidate directory) next to the running binary first (a
 * build tree: build/kgate, build/tests/bin/x), then in the fixed places; out gets the directory
 * that holds it, canonical. mode is access(2)'s. */
static int find_near_exe(const char *const *rel, size_t n_rel, const char *const *fixed, size_t n_fixed,
			 const char *probe, int mode, char *out, size_t outsz)
{
	char exe[PATH_MAX], dir[PATH_MAX], cand[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		kg_dirname(exe, dir, sizeof(dir));
	}
	for (size_t i = 0; i < n_rel + n_fixed; i++) {
		if (i < n_rel && n <= 0)
			continue;
		if (i < n_rel)
			snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
		else
			snprintf(cand, sizeof(cand), "%s", fixed[i - n_rel]);
		snprintf(path, sizeof(path), "%s/%s", cand, probe);
		if (access(path, mode))
			continue;
		char *real = realpath(cand, NULL);
		snprintf(out, outsz, "%s", real ? real : cand);
		free(real);
		return 0;
	}
	return -ENOENT;
}

int kg_path_runner(char *out, size_t outsz)
{
	const char *env = getenv("KGATE_RUNNER");
	if (env && *env) {
		snprintf(out, outsz, "%s", env);
		return access(out, X_OK) ? -ENOENT : 0;
	}
	static const char *const rel[] = {".", "../..", ".."};
	static const char *const fixed[] = {KG_LIBEXECDIR};
	char dir[PATH_MAX];
	int rc = find_near_exe(rel, 3, fixed, 1, "kgate-run", X_OK, dir, sizeof(dir));
	if (!rc && snprintf(out, outsz, "%s/kgate-run", dir) >= (int)outsz)
		rc = -ENAMETOOLONG;
	return rc;
}

int kg_path_device(char *out, size_t outsz)
{
	const char *env = getenv("KGATE_DEVICE");
	if (env && *env) {
		snprintf(out, outsz, "%s", env);
		return access(out, X_OK) ? -ENOENT : 0;
	}
	if (kg_path_runner_script("kgate-device", out, outsz))
		return -ENOENT;
	return access(out, X_OK) ? -ENOENT : 0;
}

int kg_path_include(char *out, size_t outsz)
{
	const char *home = getenv("KGATE_HOME");
	char home_inc[PATH_MAX];
	snprintf(home_inc, sizeof(home_inc), "%s/include", home && *home ? home : "/nonexistent");
	static const char *const rel[] = {"../include", "../../../include", "../../include"};
	const char *fixed[] = {home_inc, KG_DATADIR "/include", KG_INCLUDEDIR};
	/* KGATE_HOME wins over the build tree: tests point it at the source tree they check. */
	if (!find_near_exe(NULL, 0, fixed, 1, "kgate/kernel.h", R_OK, out, outsz))
		return 0;
	return find_near_exe(rel, 3, fixed + 1, 2, "kgate/kernel.h", R_OK, out, outsz);
}

int kg_path_compute_sanitizer(char *out, size_t outsz)
{
	const char *env = getenv("KGATE_COMPUTE_SANITIZER");
	if (env && *env) {
		snprintf(out, outsz, "%s", env);
		return access(out, X_OK) ? -ENOENT : 0;
	}
	const char *home = getenv("CUDA_HOME");
	const char *homes[] = {home && *home ? home : "/usr/local/cuda", "/usr/local/cuda"};
	for (size_t i = 0; i < 2; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/compute-sanitizer/compute-sanitizer", homes[i]);
		char *real = realpath(path, NULL);
		int ok = real && !access(real, X_OK) && strlen(real) < outsz;
		if (ok)
			snprintf(out, outsz, "%s", real);
		free(real);
		if (ok)
			return 0;
	}
	return -ENOENT;
}

int kg_path_runner_script(const char *name, char *out, size_t outsz)
{
	char runner[PATH_MAX], dir[PATH_MAX];
	if (kg_path_runner(runner, sizeof(runner)))
		return -ENOENT;
	kg_dirname(runner, dir, sizeof(dir));
	if (snprintf(out, outsz, "%s/%s", dir, name) >= (int)outsz)
		return -ENAMETOOLONG;
	return access(out, R_OK) ? -ENOENT : 0;
}

static int python_run(const char *py, char *const *argv, char *out, size_t outsz);

/* Runs `py -I -B -c CODE` with stdout captured (at most outsz-1 bytes); 0 when it exited 0. */
static int python_says(const char *py, const char *code, char *out, size_t outsz)
{
	char *argv[] = {(char *)py, "-I", "-B", "-c", (char *)code, NULL};
	return python_run(py, argv, out, outsz);
}

int kg_torch_toolchain(char *out, size_t outsz)
{
	char py[PATH_MAX], why[160], script[PATH_MAX];
	if (kg_path_python(py, sizeof(py), why, sizeof(why))) {
		snprintf(out, outsz, "%s", why);
		return -ENOENT;
	}
	if (kg_path_runner_script("torch_build.py", script, sizeof(script))) {
		snprintf(out, outsz, "torch_build.py not found beside kgate-run");
		return -ENOENT;
	}
	char *argv[] = {py, "-I", "-B", script, "--check", NULL};
	int rc = python_run(py, argv, out, outsz);
	if (!rc)
		return 0;
	if (!strncmp(out, "missing ", 8))
		return 1;
	snprintf(out, outsz, "%s --check failed", script);
	return -EIO;
}

/* Runs argv (argv[0] the Python py) with stdout captured; 0 when it exited 0. */
static int python_run(const char *py, char *const *argv, char *out, size_t outsz)
{
	int pfd[2];
	out[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	extern char **environ;
	pid_t pid;
	int rc = posix_spawnp(&pid, py, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc) {
		close(pfd[0]);
		return -rc;
	}
	size_t n = 0;
	ssize_t k;
	while (n + 1 < outsz && ((k = read(pfd[0], out + n, outsz - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		n += k > 0 ? (size_t)k : 0;
	out[n] = '\0';
	close(pfd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -ENOENT;
}

/* `import torch` takes seconds: each process asks once and keeps the answer. */
static pthread_mutex_t py_mu = PTHREAD_MUTEX_INITIALIZER;
static int py_done, py_rc;
static char py_path[PATH_MAX], py_ver[160];

static void find_python(void)
{
	/* what it has for a module on a GPU: torch.compile, CUDA (the version torch was built with),
	 * Triton (found, not imported: importing it takes a second) */
	static const char code[] =
		"import torch, importlib.util as u\n"
		"c = getattr(torch.version, 'cuda', None)\n"
		"t = u.find_spec('triton') is not None\n"
		"print('torch %s%s%s%s' % (torch.__version__, '' if hasattr(torch, 'compile') else ' (no torch.compile)',"
		" ' (CUDA %s)' % c if c else ' (no CUDA)', ', Triton' if t else ''))";
	const char *env = getenv("KGATE_PYTHON");
	const char *cands[] = {env && *env ? env : NULL, "/usr/bin/python3", "python3"};
	char tried[400] = "";
	for (size_t i = 0; i < KG_ARRAY_LEN(cands); i++) {
		if (!cands[i])
			continue;
		char said[160];
		if (!python_says(cands[i], code, said, sizeof(said))) {
			/* a name on PATH becomes the absolute path of what answered: the sandbox needs one */
			if (strchr(cands[i], '/') ||
			    python_says(cands[i], "import sys; print(sys.executable)", py_path, sizeof(py_path)) ||
			    py_path[0] != '/')
				snprintf(py_path, sizeof(py_path), "%s", cands[i]);
			snprintf(py_ver, sizeof(py_ver), "%s", said);
			py_rc = 0;
			return;
		}
		size_t l = strlen(tried);
		snprintf(tried + l, sizeof(tried) - l, "%s%s", l ? ", " : "", cands[i]);
		/* KGATE_PYTHON is the user's word: without torch there, nothing else is tried */
		if (i == 0)
			break;
	}
	py_rc = -ENOENT;
	snprintf(py_ver, sizeof(py_ver), "no Python with torch (tried %s; scripts/deps.sh installs python3-torch)",
		 tried);
}

int kg_path_python(char *out, size_t outsz, char *version, size_t versz)
{
	pthread_mutex_lock(&py_mu);
	if (!py_done) {
		find_python();
		py_done = 1;
	}
	int rc = py_rc;
	if (!rc)
		snprintf(out, outsz, "%s", py_path);
	if (version)
		snprintf(version, versz, "%s", py_ver);
	pthread_mutex_unlock(&py_mu);
	return rc;
}

/* PREFIX of PREFIX/bin/python3, into out (of outsz) */
static void strip_bin(const char *exe, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s", exe);
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(out, '/');
		if (slash && slash != out)
			*slash = '\0';
	}
}

static int under_usr(const char *p)
{
	return !strncmp(p, "/usr", 4) && (!p[4] || p[4] == '/');
}

void kg_python_sandbox_paths(const char *py, const char *script, char *prefix, size_t prefix_sz,
			     struct kg_sb_path *paths, int *n)
{
	if (strncmp(script, "/usr/", 5))
		paths[(*n)++] = (struct kg_sb_path){.host = script, .inside = NULL, .flags = 0};
	/* the interpreter's own prefix (its binary, resolved), in the first half of the caller's
	 * buffer; a virtual environment's (PREFIX/pyvenv.cfg beside the bin/ it was named in, whose
	 * python3 links to another prefix's binary) in the second: its site-packages hold torch */
	size_t half = prefix_sz / 2;
	char *venv = prefix + half;
	char *real = realpath(py, NULL);
	strip_bin(real ? real : py, prefix, half);
	free(real);
	if (!under_usr(prefix))
		paths[(*n)++] = (struct kg_sb_path){.host = prefix, .inside = NULL, .flags = KG_SB_PATH_EXEC};
	strip_bin(py, venv, half);
	char cfg[PATH_MAX + 16];
	snprintf(cfg, sizeof(cfg), "%s/pyvenv.cfg", venv);
	if (py[0] == '/' && strcmp(venv, prefix) && !under_usr(venv) && !access(cfg, R_OK))
		paths[(*n)++] = (struct kg_sb_path){.host = venv, .inside = NULL, .flags = KG_SB_PATH_EXEC};
}

int kg_torch_placement(const char *version, struct kg_gpu_info *gpu, char *why, size_t whysz)
{
	const char *force = getenv("KGATE_TORCH_DEVICE");
	memset(gpu, 0, sizeof(*gpu));
	if (force && !strcmp(force, "cpu")) {
		snprintf(why, whysz, "KGATE_TORCH_DEVICE=cpu");
		return 0;
	}
	if (!version || !strstr(version, "(CUDA ")) {
		snprintf(why, whysz, "kgate's torch has no CUDA (%s)", version ? version : "no Python with torch");
		return 0;
	}
	kg_gpu_probe(gpu);
	if (!gpu->present) {
		snprintf(why, whysz, "no GPU (%s)", gpu->why);
		return 0;
	}
	snprintf(why, whysz, "%s, %s", gpu->name, version);
	return 1;
}
