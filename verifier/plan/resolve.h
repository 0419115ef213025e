/* One resolver for what a command names: a task, a policy, a backend, and (paths.h) kgate's own
 * files on this host (the runner, the candidate header, compute-sanitizer). verify, search, doctor
 * and tasks all ask here, so their search paths cannot drift apart. */
#ifndef KG_RESOLVE_H
#define KG_RESOLVE_H

#include <stddef.h>

#include "kg_common.h"
#include "policy/policy.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/paths.h"
#include "verifier/plan/task.h"

/* A policy by name ("default", "strict": $KGATE_HOME/policy, SYSCONFDIR, ./policy) or path. NULL
 * is "default" where one is installed, else the built-in defaults. */
int kg_resolve_policy(const char *name_or_path, struct kg_policy *p, kg_error *e);

/* A task by name (the task search path, first match) or manifest path. */
int kg_resolve_task(const char *name_or_path, struct kg_task *t, kg_error *e);

/* A task as kgate verify and kgate search name it: a KernelBench-format module (PROBLEM.py), derived
 * with dims (its top-level constants, "N=64,D=128"; NULL: its own), or a name or manifest path as
 * kg_resolve_task, which takes no dims (-EINVAL). */
int kg_resolve_task_dims(const char *task, const char *dims, struct kg_task *t, kg_error *e);

/* The task search path in order: $KGATE_TASKS, $KGATE_HOME/tasks, DATADIR/tasks, ./tasks. */
#define KG_TASK_DIRS_MAX 4
int kg_task_dirs(char dirs[KG_TASK_DIRS_MAX][4096]);
/* Calls fn for each task name found on the search path, once per name (the first directory that
 * holds it wins, as kg_resolve_task does), in name order; path is its manifest. Stops early when
 * fn returns nonzero and returns that value. */
typedef int (*kg_task_visit_fn)(const char *name, const char *path, void *ctx);
int kg_tasks_each(kg_task_visit_fn fn, void *ctx);

/* The backend a candidate is written for: by name when given, else by the file's extension. */
int kg_resolve_backend(const char *name, const char *candidate, const struct kg_backend **out, kg_error *e);
/* The backend a search uses when none is named: a GPU backend whose reference the task has when a
 * GPU is present, else cpu. */
const struct kg_backend *kg_resolve_default_backend(const struct kg_task *t, int gpu_present);

#endif
