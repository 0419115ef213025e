/* Inside the sandboxed program, after exec (the runner calls it, in the process that will host the
 * candidate): the program's own seals. A program that hosts untrusted code makes its code,
 * read-only data, RELRO (GOT) and the state its measurements rest on read-only and seals them
 * (mseal(2), Linux >= 6.10), then, once the untrusted code is loaded, shuts the doors to new code:
 * no file opens (Landlock, and a killing seccomp rule) and no new executable mappings. Nothing here
 * is a guarantee to the parent: once the candidate runs, it may undo whatever this file did that
 * the kernel lets it undo; the parent's verdicts rest on what it observes from outside. The
 * spawner's half (the mseal probe, the paths it hands over) is spawn.c's. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sb_int.h"

#ifndef SYS_mseal
#define SYS_mseal 462 /* the same number on every architecture that has it */
#endif

#define PAGE_DOWN(x) ((uintptr_t)(x) & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1))
#define PAGE_UP(x) PAGE_DOWN((uintptr_t)(x) + (uintptr_t)sysconf(_SC_PAGESIZE) - 1)

/* The spawner asked for mseal (the layer is active): then a seal that fails is an error. */
static int mseal_wanted(void)
{
	const char *s = getenv(KG_SB_ENV_MSEAL);
	return s && !strcmp(s, "1");
}

static int seal_range(uintptr_t lo, uintptr_t hi, int must, kg_error *e)
{
	if (hi <= lo || !mseal_wanted())
		return 0;
	if (syscall(SYS_mseal, lo, hi - lo, 0UL) && must)
		return kg_err(e, -errno, "mseal of %#lx..%#lx: %s", (unsigned long)lo, (unsigned long)hi,
			      strerror(errno));
	return 0;
}

int kg_sb_seal_range(void *addr, size_t len, kg_error *e)
{
	uintptr_t lo = PAGE_DOWN(addr), hi = PAGE_UP((uintptr_t)addr + len);
	return seal_range(lo, hi, 1, e);
}

int kg_sb_seal_memory(void *addr, size_t len, int prot, kg_error *e)
{
	uintptr_t lo = PAGE_DOWN(addr), hi = PAGE_UP((uintptr_t)addr + len);
	if (mprotect((void *)lo, hi - lo, prot))
		return kg_err(e, -errno, "mprotect of the sealed state: %s", strerror(errno));
	return seal_range(lo, hi, 1, e);
}

struct image_walk {
	kg_error *e;
	int rc;
};

/* One object: its segments without write access (code, read-only data) and its RELRO (the GOT
 * with -z now), which ld.so has made read-only by now. A segment's last page that a writable
 * segment shares stays out. */
static int seal_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct image_walk *w = arg;
	/* the vDSO is the kernel's: sealed where the kernel lets us, no error where not */
	int must = !(info->dlpi_name && strstr(info->dlpi_name, "linux-vdso"));
	for (int i = 0; i < info->dlpi_phnum && !w->rc; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_GNU_RELRO) {
			w->rc = seal_range(PAGE_DOWN(lo), PAGE_DOWN(hi), must, w->e);
			continue;
		}
		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
			continue;
		lo = PAGE_DOWN(lo);
		hi = PAGE_UP(hi);
		for (int j = 0; j < info->dlpi_phnum; j++) {
			const ElfW(Phdr) *q = &info->dlpi_phdr[j];
			uintptr_t qlo = PAGE_DOWN(info->dlpi_addr + q->p_vaddr);
			if (q->p_type == PT_LOAD && (q->p_flags & PF_W) && qlo < hi && qlo >= lo)
				hi = qlo;
		}
		w->rc = seal_range(lo, hi, must, w->e);
	}
	return w->rc;
}

int kg_sb_seal_image(kg_error *e)
{
	struct image_walk w = {.e = e};
	dl_iterate_phdr(seal_object, &w);
	return w.rc;
}

/* Parses KG_SB_ENV_SEAL into at most max paths; -EINVAL on anything the formatter does not write. */
static int seal_paths(char *s, struct sb_seal_path *out, int max)
{
	int n = 0;
	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return -E2BIG;
		int rw = !strncmp(tok, "rw:/", 4);
		if (!rw && strncmp(tok, "r:/", 3))
			return -EINVAL;
		out[n].path = tok + (rw ? 3 : 2);
		out[n++].rw = rw;
	}
	return n;
}

/* mmap/mprotect/pkey_mprotect with PROT_EXEC, and (when nothing may be opened any more) every
 * open, kill the process. No listener (the program's first filter holds the only one): the parent
 * sees a SIGSYS it cannot name, after the seal. No TSYNC: the seal is the calling thread's, so that
 * a thread the program kept unsealed can still load the untrusted code, and the untrusted code,
 * whatever it does in that thread, cannot lift a seal on another (TSYNC fails on a diverged
 * thread). NNP is already set by the sandbox; the filter may not call prctl for it. */
static int kill_rule(scmp_filter_ctx ctx, const char *name, unsigned n, const struct scmp_arg_cmp *c)
{
	int nr = seccomp_syscall_resolve_name(name);
	return nr == __NR_SCMP_ERROR ? 0 : seccomp_rule_add_array(ctx, SCMP_ACT_KILL_PROCESS, nr, n, c);
}

static int load_seal(scmp_filter_ctx ctx, int rc, kg_error *e)
{
	if (!rc && !(rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)))
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc ? kg_err(e, rc, "seal: loading the filter: %s", strerror(-rc)) : 0;
}

static int seal_filter(int opens_allowed, unsigned flags, kg_error *e)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc = 0;
	if (!ctx)
		return kg_err(e, -ENOMEM, "seal: cannot create a filter");
	static const char *const exec_calls[] = {"mmap", "mprotect", "pkey_mprotect"};
	struct scmp_arg_cmp x = SCMP_A2_64(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC);
	for (size_t i = 0; i < KG_ARRAY_LEN(exec_calls) && !rc; i++)
		rc = kill_rule(ctx, exec_calls[i], 1, &x);
	/* a file mapped after the seal (the arena's memfds again, at another place or over a guard) */
	struct scmp_arg_cmp file = SCMP_A3_64(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0);
	if (!rc && (flags & KG_SB_SEAL_NO_FILE_MAPS))
		rc = kill_rule(ctx, "mmap", 1, &file);
	static const char *const opens[] = {"open", "openat", "openat2", "creat", "open_by_handle_at"};
	for (size_t i = 0; i < KG_ARRAY_LEN(opens) && !rc && !opens_allowed; i++)
		rc = kill_rule(ctx, opens[i], 0, NULL);
	return load_seal(ctx, rc, e);
}

int kg_sb_seal_loader(kg_error *e)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc = 0;
	if (!ctx)
		return kg_err(e, -ENOMEM, "seal: cannot create a filter");
	/* the loader maps the library's own file executable; nothing else may become code */
	struct scmp_arg_cmp anon_exec[2] = {SCMP_A2_64(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC),
					    SCMP_A3_64(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, MAP_ANONYMOUS)};
	struct scmp_arg_cmp x = SCMP_A2_64(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC);
	if (!(rc = kill_rule(ctx, "mmap", 2, anon_exec)) && !(rc = kill_rule(ctx, "mprotect", 1, &x)))
		rc = kill_rule(ctx, "pkey_mprotect", 1, &x);
	/* reads only: a constructor writes no file (a cache persisted to disk) */
	static const uint64_t writes[][2] = {{O_ACCMODE, O_WRONLY}, {O_ACCMODE, O_RDWR}, {O_CREAT, O_CREAT},
					     {O_TRUNC, O_TRUNC}, {O_APPEND, O_APPEND}};
	for (size_t i = 0; i < KG_ARRAY_LEN(writes) && !rc; i++) {
		struct scmp_arg_cmp at = SCMP_A2_64(SCMP_CMP_MASKED_EQ, writes[i][0], writes[i][1]);
		struct scmp_arg_cmp op = SCMP_A1_64(SCMP_CMP_MASKED_EQ, writes[i][0], writes[i][1]);
		if (!(rc = kill_rule(ctx, "openat", 1, &at)))
			rc = kill_rule(ctx, "open", 1, &op);
	}
	static const char *const never[] = {"creat", "openat2", "open_by_handle_at", "memfd_create"};
	for (size_t i = 0; i < KG_ARRAY_LEN(never) && !rc; i++)
		rc = kill_rule(ctx, never[i], 0, NULL);
	return load_seal(ctx, rc, e);
}

int kg_sb_seal_calls(unsigned flags, kg_error *e)
{
	struct sb_seal_path paths[SB_SEAL_MAX_PATHS];
	const char *env = getenv(KG_SB_ENV_SEAL);
	char *copy = strdup(env ? env : "");
	int rc;
	if (!copy)
		return kg_err(e, -ENOMEM, "seal: out of memory");
	int n = seal_paths(copy, paths, SB_SEAL_MAX_PATHS);
	if (n < 0) {
		rc = kg_err(e, n, "seal: malformed %s", KG_SB_ENV_SEAL);
		goto out;
	}
	/* Landlock: a domain stacked on the sandbox's, handling every file right and granting only the
	 * listed paths. Without Landlock (an old kernel, the layer off) the seccomp rule stands alone,
	 * and it alone is what reports the attempt. */
	rc = sb_landlock_restrict_paths(paths, n);
	if (rc && rc != -ENOSYS && rc != -EOPNOTSUPP) {
		rc = kg_err(e, rc, "seal: Landlock: %s", strerror(-rc));
		goto out;
	}
	rc = seal_filter(n > 0, flags, e);
out:
	free(copy);
	return rc;
}
