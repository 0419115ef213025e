/* Running a command that spawns sandboxes (verify, search, task import, doctor) under a supervisor
 * process that leaves nothing behind on SIGINT/SIGTERM/SIGHUP or a crash (cli/supervise.c). */
#ifndef KG_CLI_SUPERVISE_H
#define KG_CLI_SUPERVISE_H

/* Runs fn(argc, argv) in a forked worker and returns its exit code; 128+signal after an
 * interruption ("kgate: WHAT interrupted" on stderr), 3 when the worker crashed. keep: the
 * worker's work directory was asked to stay (--keep). */
int kg_supervise(const char *what, int keep, int (*fn)(int, char **), int argc, char **argv);

#endif
