/* Finding and loading agent plugins: name resolution, dlopen, and the checks that turn a plugin
 * built for another ABI, or missing an entry point, into a clear error instead of a crash later. */
#include "plugins/plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_path(const char *name)
{
	size_t n = strlen(name);
	return strchr(name, '/') || (n > 3 && !strcmp(name + n - 3, ".so"));
}

static int try_dir(const char *dir, const char *name, char *out, size_t outsz)
{
	if (!dir || !*dir)
		return -ENOENT;
	int n = snprintf(out, outsz, "%s/%s.so", dir, name);
	if (n < 0 || (size_t)n >= outsz)
		return -ENAMETOOLONG;
	return access(out, R_OK) ? -ENOENT : 0;
}

int kg_plugin_resolve(const char *name, char *out, size_t outsz, kg_error *e)
{
	if (!name || !*name)
		return kg_err(e, -EINVAL, "no agent plugin given");
	if (is_path(name)) {
		if (access(name, R_OK))
			return kg_err(e, -errno, "agent plugin %s: %s", name, strerror(errno));
		snprintf(out, outsz, "%s", name);
		return 0;
	}
	/* Built-in names are plain words; anything else would escape the plugin directory. */
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
			return kg_err(e, -EINVAL, "agent '%s': not a built-in name and not a path", name);
	if (!try_dir(getenv("KGATE_PLUGINDIR"), name, out, outsz))
		return 0;
	char exe[PATH_MAX], dir[PATH_MAX], sub[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		kg_dirname(exe, dir, sizeof(dir));
		/* build/kgate next to build/plugins/; test programs live in build/tests/bin/. */
		const char *rel[] = {"plugins", "../../plugins"};
		for (size_t i = 0; i < KG_ARRAY_LEN(rel); i++) {
			snprintf(sub, sizeof(sub), "%s/%s", dir, rel[i]);
			if (!try_dir(sub, name, out, outsz))
				return 0;
		}
	}
	if (!try_dir(KG_PLUGINDIR, name, out, outsz))
		return 0;
	return kg_err(e, -ENOENT, "agent '%s': no %s.so in $KGATE_PLUGINDIR, the build tree or %s", name, name,
		      KG_PLUGINDIR);
}

int kg_plugin_check(const struct kg_agent_plugin *api, const char *path, kg_error *e)
{
	if (!api)
		return kg_err(e, -EINVAL, "%s: %s() returned NULL", path, KG_AGENT_SYMBOL);
	if (api->abi_major != KG_AGENT_ABI_MAJOR)
		return kg_err(e, -EPROTO, "%s: agent ABI %u.%u, this kgate speaks %u.x; rebuild the plugin against this kgate's <kgate/agent.h>",
			      path, api->abi_major, api->abi_minor, (unsigned)KG_AGENT_ABI_MAJOR);
	/* A smaller table than v1.0's cannot hold the entry points we call. */
	if (api->struct_size < sizeof(struct kg_agent_plugin))
		return kg_err(e, -EPROTO, "%s: plugin table is %u bytes, ABI %u.0 needs %zu", path, api->struct_size,
			      (unsigned)KG_AGENT_ABI_MAJOR, sizeof(struct kg_agent_plugin));
	const char *missing = !api->name || !*api->name ? "name"
			      : !api->create		? "create"
			      : !api->propose		? "propose"
			      : !api->free_buf		? "free_buf"
			      : !api->destroy		? "destroy"
						: NULL;
	if (missing)
		return kg_err(e, -EPROTO, "%s: plugin table has no %s", path, missing);
	return 0;
}

int kg_plugin_load(const char *path, struct kg_plugin *p, kg_error *e)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->path, sizeof(p->path), "%s", path);
	/* RTLD_LOCAL: two plugins (or a plugin and kgate) may bundle different copies of the same
	 * helper code without one binding to the other's symbols. */
	p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!p->dl)
		return kg_err(e, -ENOEXEC, "cannot load agent plugin: %s", dlerror());
	dlerror();
	void *sym = dlsym(p->dl, KG_AGENT_SYMBOL);
	const char *why = dlerror();
	int rc;
	if (!sym || why) {
		rc = kg_err(e, -ENOEXEC, "%s is not a kgate agent plugin: it does not export %s()%s%s", path,
			    KG_AGENT_SYMBOL, why ? ": " : "", why ? why : "");
		goto fail;
	}
	kg_agent_plugin_fn fn;
	/* POSIX guarantees this round trip for dlsym results; the memcpy keeps -Wpedantic quiet. */
	memcpy(&fn, &sym, sizeof(fn));
	p->api = fn();
	if ((rc = kg_plugin_check(p->api, path, e)))
		goto fail;
	return 0;
fail:
	dlclose(p->dl);
	p->dl = NULL;
	p->api = NULL;
	return rc;
}

void kg_plugin_unload(struct kg_plugin *p)
{
	if (p->dl)
		dlclose(p->dl);
	p->dl = NULL;
	p->api = NULL;
}
