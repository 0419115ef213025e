/* The session's internals shared by its two halves: session.c (spawning the runner, the one-reply
 * protocol, stopping and resuming its process, the end) and session_call.c (one call of the hosted
 * .so, host or device, and the trusted clock's calibration). Nothing outside verifier/session*.c
 * includes this. */
#ifndef KG_SESSION_INT_H
#define KG_SESSION_INT_H

#include "verifier/session/session.h"

/* The process ended or is ended now: KG_SESSION_ENDED, outcome filled. */
int kg_sess_ended(struct kg_session *s);
/* The runner process's CPU time so far; 0 when it cannot be read. */
uint64_t kg_sess_cpu_ns(const struct kg_session *s);
/* Before a command: the stopped process resumes (nothing may have come on the channel meanwhile). */
int kg_sess_resume(struct kg_session *s);
/* After a reply: the process is stopped, and a watched one's threads held to what it may have. */
int kg_sess_hold(struct kg_session *s, uint32_t op);
/* A command record for op with the arena's current layout. */
void kg_sess_fill_cmd(const struct kg_session *s, struct kg_wire_cmd *cmd, enum kg_wire_op op, uint32_t arg);
/* Sends cmd and waits for its one reply (the process resumed already); *t_sent: when it left. With
 * a host RUN's probe (c), the process is stopped once mid-call for it (*probed). */
int kg_sess_exchange_probed(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
			    uint64_t *t_sent, const struct kg_call *c, int *probed, kg_error *e);
int kg_sess_exchange(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
		     uint64_t *t_sent, kg_error *e);
/* Waits for the reply to (op, seq) within timeout_s; *pid (optional) gets the sender's pid from the
 * kernel (SCM_CREDENTIALS, HELLO). Anything else on the channel is the runner's fault. */
int kg_sess_recv_reply(struct kg_session *s, uint32_t op, uint64_t seq, struct kg_wire_reply *r, double timeout_s,
		       pid_t *pid);
/* With a keeper: END's and SETTLE's in_hi, the outputs' start where every input lies before it
 * (what the keeper compares on the device instead of sending back); 0 otherwise. */
uint64_t kg_sess_in_hi(const struct kg_session *s);
/* The trusted clock's calibration on calls that do nothing, before LOAD. */
int kg_sess_calibrate(struct kg_session *s, kg_error *e);

#endif
