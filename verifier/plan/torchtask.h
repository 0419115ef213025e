/* PyTorch tasks: a KernelBench-format module (class Model, get_inputs, get_init_inputs) turned into
 * a task manifest by the torch runner's derive mode in its sandbox, and its reference staged for a
 * run. The manifest is an ordinary one whose reference is the module (reference: {torch: ...}). */
#ifndef KG_TORCHTASK_H
#define KG_TORCHTASK_H

#include <limits.h>

#include "kg_common.h"
#include "verifier/plan/task.h"
#include "verifier/judge/verdict.h"

struct kg_run;
struct kg_plan;

#define KG_TORCH_MAX_SHAPES 32

/* A run's state (runner/torch_derive.py's state()): the file both torch runners get (kept buffers,
 * the constructor's arguments as data, the Model's entries and which task input each is), and what
 * kgate reads of it: the mode the Model runs in, which shapes it refuses and why, and each entry's
 * fate at the base shape. */
struct kg_torch_state {
	char path[PATH_MAX + 48];
	char mode[8], mode_from[8];
	int n_shapes;
	unsigned char refused[KG_TORCH_MAX_SHAPES];
	char why[KG_TORCH_MAX_SHAPES][320];
	int n_entries, n_more;
	struct kg_module_entry entries[32];
};

/* 1 when path names a Python module (ends in ".py"). */
int kg_task_is_module(const char *path);
/* The task's name for module: its file name without ".py", in the characters a name may hold. */
void kg_torch_task_name(const char *module, char *out, size_t outsz);
/* The manifest text derived from module with dims ("N=64,D=128": its top-level integer names set
 * first, the names derived from them following; NULL for none), named name (NULL: from the file's
 * name). -EINVAL with the reason when the module's task cannot be mapped (exit 2), -ENOENT when no
 * Python with torch is found. yaml is the caller's to free. */
int kg_torch_derive(const char *module, const char *dims, const char *name, kg_buf *yaml, kg_error *e);
/* Derives and loads the task of module (kgate verify PROBLEM.py): its reference is the module. */
int kg_torch_task_load(const char *module, const char *dims, struct kg_task *t, kg_error *e);
/* kgate task import's writing: yaml (derived, named name) as DIR/task.yaml, and a copy of the module
 * beside it as DIR/NAME.py. */
int kg_torch_write_task(const char *module, const char *name, const kg_buf *yaml, const char *out_dir, kg_error *e);
/* The build phase's stand-in for compiling an interpreted reference: its source, as read, written
 * to the run's work directory for the runner to load. */
int kg_torch_stage_ref(struct kg_run *r, kg_error *e);
/* The state job's spec for plan p: the policy's module_mode, the task's inputs (name and role, in
 * order) and every shape of the plan. spec is the caller's to free. */
int kg_torch_state_spec(const struct kg_plan *p, kg_buf *spec, kg_error *e);
/* The same for a manifest's torch baseline (`baseline: torch:`), a module whose Model takes every
 * input of the task in order (tasks/README.md): each input the forward's, the Model's own entries
 * kept at its constructor's values. */
int kg_torch_state_spec_forward(const struct kg_plan *p, kg_buf *spec, kg_error *e);
/* Builds the state for spec from module (the staged problem module, trusted as a reference is, run
 * in a sandboxed torch process), writes it to dir/state and reads it into st. -EINVAL with why
 * where the process refused the job; -ENOENT where no Python with torch is found. */
int kg_torch_state_build(const char *module, const char *dir, const char *spec, struct kg_torch_state *st,
			 kg_error *e);
/* Reads the text lines of a state file's reply (everything before its "json" line) into st. */
int kg_torch_state_parse(const char *data, size_t len, struct kg_torch_state *st, kg_error *e);

#endif
