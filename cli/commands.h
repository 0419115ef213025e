/* Commands that rooms other than the verifier add to the kgate binary (the search loop). Each
 * room defines its entries; cli/extra.c lists them. */
#ifndef KG_COMMANDS_H
#define KG_COMMANDS_H

struct kg_command {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv);
};

/* Terminated by an entry with name == NULL. */
extern const struct kg_command kg_extra_commands[];

#endif
