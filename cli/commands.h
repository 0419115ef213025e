/* Commands that rooms other than the verifier add to the kgate binary (the search loop). Each
 * room defines its entries; cli/commands.c lists them. */
#ifndef KG_COMMANDS_H
#define KG_COMMANDS_H

struct kg_command {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv);
	/* under kg_supervise (signals and crashes leave nothing): every command that spawns a
	 * sandbox, directly or through the verifier, and any other long one */
	int supervised;
};

/* cli/tasks.c: `kgate tasks [--json]` and `kgate validate FILE...`. */
int kg_cmd_tasks(int argc, char **argv);
int kg_cmd_validate(int argc, char **argv);
/* cli/taskimport.c: `kgate task import PROBLEM.py --out DIR`, `--kernelbench DIR --out DIR`. */
int kg_cmd_task(int argc, char **argv);

/* Terminated by an entry with name == NULL. */
extern const struct kg_command kg_extra_commands[];

#endif
