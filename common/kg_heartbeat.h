/* A heartbeat for long jobs whose stderr is not a terminal (CI logs): every few seconds one plain
 * line says what is running, for how long, and about how long the current phase has left. The
 * job only names its phase; a thread of its own does the printing. */
#ifndef KG_HEARTBEAT_H
#define KG_HEARTBEAT_H

/* Starts the thread: lines "[kgate] LABEL: PHASE, N s elapsed[, about M s left in this phase]"
 * every interval_s seconds on stderr. 0, or -errno when the thread cannot start. */
int kg_heartbeat_start(const char *label, double interval_s);
/* The current phase, e.g. "trial 12/40: class large"; a first "i/n" in it is the phase's progress,
 * from which the estimate comes. Cheap, thread-safe; a no-op when no heartbeat runs. */
void kg_heartbeat_phase(const char *phase);
/* Stops and joins the thread (no line after it returns). */
void kg_heartbeat_stop(void);

#endif
