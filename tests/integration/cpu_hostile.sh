#!/bin/sh
# Integration: every known shortcut, as a real CPU candidate, must be rejected for its own reason
# code; honest-but-unusual candidates must be accepted. Prints the false-positive (honest
# rejected) and false-negative (hostile accepted, or rejected for another reason) counts.
set -u
. tests/integration/lib.sh

H=examples/hostile
U=examples/unusual
P="--policy policy/ci.yaml --iterations 5"
T="--policy tests/data/threads.yaml"
fails_before=0
honest() { n_honest=$((n_honest + 1)); fails_before=$failures; expect 0 - "$@"; fp=$((fp + failures - fails_before)); }
hostile() { n_hostile=$((n_hostile + 1)); fails_before=$failures; expect 1 "$@"; fn=$((fn + failures - fails_before)); }
fp=0 fn=0 n_honest=0 n_hostile=0

honest softmax $U/softmax_double.c $P
honest softmax $U/softmax_threads.c $T
# twelve threads, each with a malloc'd row: glibc's ninth arena read /sys after the seal (kgate 0.2:
# sandbox.dlopen); the runner sets the arena limit before it seals itself
honest softmax $U/softmax_threads_malloc.c $T
# a `static __thread` scratch buffer: __tls_get_addr, and the loader's allocation of the TLS block
# on the sealed thread's first access (kgate 0.2: static.forbidden_symbol)
honest softmax $U/softmax_tls.c $P
honest matmul $U/matmul_transposed.c $P
honest layernorm $U/layernorm_pairwise.c $P
# CI rejected it at this seed (near-duplicate rows of one value, D2=1: the row mean's rounding
# magnified 300-fold by |w|/std, 334 % of the output-wide bound); the reference's kg_error_terms
# (terms: reference) judges each element by its own condition
honest layernorm $U/layernorm_pairwise.c $P --seed c1c2cbc5269ff253199b0d39641b6a532c0972ea3b8f5859eb02b27e3e25f614
honest conv_relu_pool $U/conv_im2col.c $P
honest softmax $H/low_precision.c --policy tests/data/bf16.yaml
honest softmax $U/softmax_kahan.c $P
honest softmax $U/softmax_twopass.c $P
honest layernorm $U/layernorm_kahan.c $P
honest layernorm $U/layernorm_twopass.c $P
# Rows of the KernelBench lengths (shape set long: softmax 8x65536, LayerNorm 2x64x256x256): the
# growth term bounds a softmax row's common factor and gives way to LayerNorm's own allowance
honest softmax examples/softmax/online.c $P --shape-set long --trials 1
honest layernorm $U/layernorm_twopass.c $P --shape-set long --trials 1

hostile check.unwritten_output softmax $H/unwritten.c $P
hostile sandbox.crash softmax $H/zero_inputs.c $P
hostile check.constant_output softmax $H/constant.c $P
hostile check.input_passthrough softmax $H/passthrough.c $P
hostile check.unwritten_output softmax $H/partial.c $P
hostile check.shape_variant softmax $H/nominal_only.c $P
hostile check.mismatch softmax $H/low_precision.c $P
hostile check.stale_result softmax $H/cache_late.c $P --trials 1
hostile check.async_escape softmax $H/async_thread.c $T
hostile static.forbidden_symbol softmax $H/async_thread.c $P
# A fault is named from the wait status (SIGSEGV): kgate relies on no handler in the candidate's
# process, and believes no address it prints (forged_fault.c)
hostile sandbox.crash softmax $H/oob_write.c $P
# Keyed secrets, coverage and hardware-enforced host buffers (each accepted by kgate 0.1):
hostile check.mismatch softmax $H/canary_secret.c --policy tests/data/normal_only.yaml
hostile sandbox.crash softmax $H/guard_scratch.c $P
hostile sandbox.crash softmax $H/input_scratch.c $P
hostile sandbox.crash softmax $H/overread.c $P
hostile check.shape_variant softmax $H/mod4_tail.c $P
hostile check.mismatch softmax $H/row_cache.c $P
hostile check.mismatch layernorm $H/onepass_var.c $P
hostile check.mismatch layernorm $H/fake_terms.c $P
# Coverage (accepted by kgate 0.2): no max subtraction, guarded by the row's first element only;
# one large finite value at a secret column (classes spiked and mixed) overflows its exp
hostile check.nan softmax $H/softmax_nomax_guarded.c $P
# Too-low precision at long rows (accepted by kgate 0.2 under the growth term 2^-10): a cubic
# polynomial exp (1.7e-4 per element, varying) and 1/std from rsqrtss without its Newton step
hostile check.mismatch softmax $H/poly_exp.c $P --shape-set long --trials 1
hostile check.mismatch layernorm $H/rsqrt_nonewton.c $P --shape-set long --trials 1
hostile static.forbidden_symbol softmax $H/call_reference.c $P
hostile static.forbidden_symbol softmax $H/patch_timer.c $P
hostile static.forbidden_symbol softmax $H/persist_file.c $P
hostile sandbox.syscall softmax $H/raw_socket.c $P
hostile sandbox.syscall softmax $H/constructor.c $P
hostile sandbox.timeout softmax $H/infinite_loop.c $P
if [ -n "${KGATE_SANITIZE:-}" ]; then
	# ASan reserves terabytes, so sanitizer builds run without the address-space and mmap bounds;
	# its own allocator refuses the 30 GB and aborts instead, and its report opens /proc/self/maps,
	# which the sealed runner's filter ends: the abort is named as a post-load open.
	hostile sandbox.dlopen softmax $H/huge_malloc.c $P
else
	hostile sandbox.memory softmax $H/huge_malloc.c $P
fi
# memory held in shared anonymous mappings, each under the bound, their sum over it (kgate 0.3
# counted no shared memory where the address space was unbounded): the supervisor counts the
# process's memory as a whole; under the same 1024 MiB an honest kernel passes (sanitizer builds
# run unbounded)
if [ -z "${KGATE_SANITIZE:-}" ]; then
	hostile sandbox.memory softmax $H/shared_hog.c --policy tests/data/memory.yaml --iterations 5
	honest softmax examples/softmax/online.c --policy tests/data/memory.yaml --iterations 5
fi
hostile sandbox.output_limit softmax $H/print_flood.c $P
# a reply written beside the runner's: the second message on the channel is the finding
hostile sandbox.protocol softmax $H/forge_timing.c $P
# Runner tampering and run-time code, against the sealed runner and the trusted clock (each
# accepted by kgate 0.1; the faults are writes to sealed pages):
# the GOT's mprotect over the runner's sealed image: refused and named by the supervisor
hostile sandbox.tamper softmax $H/got_clock.c $P
# no flush state lives in the candidate's process any more (the parent's streaming stores keep
# every call cold): the scan finds nothing to zero and the kernel computes honestly
honest softmax $H/zero_flush.c $P
hostile timing.tampered softmax $H/stack_clock.c $P
# the same forger where threads are allowed: bounded by its one thread's CPU time and the RUN
# round trip, not by its CPU time over the host's CPUs (accepted at CPU/ncpu before: the red team)
hostile timing.tampered softmax $H/stack_clock.c $T
hostile sandbox.dlopen softmax $H/dlopen_symtab.c $P
hostile sandbox.dlopen softmax $H/jit_exec.c $P
hostile check.stale_result softmax $H/phase_switch.c $P

# The candidate's process as a black box (each accepted, or "not verified", by kgate 0.2):
# work before the clock starts, the protocol answered by the candidate itself (forged 853x under
# the strict gate) or its recvfrom trapped by a filter of its own (27x): charged and named
S="--policy policy/strict.yaml --shape-set ci --iterations 5"
hostile timing.tampered softmax $H/own_protocol.c $S
hostile sandbox.tamper softmax $H/seccomp_trap.c $S
# the loader thread kept alive past LOAD, working unsealed: counted from outside (a sanitizer
# build's runner joins its threads through its own interceptor, which the trick does not fool)
if [ -z "${KGATE_SANITIZE:-}" ]; then
	hostile sandbox.thread softmax $H/loader_thread.c $P
fi
# guard pages the candidate owns: reopened with mprotect, or mapped over by its own fault handler
hostile sandbox.tamper softmax $H/guard_mprotect.c $P
hostile sandbox.syscall softmax $H/guard_handler.c $P
# a rejection turned into exit 3: the map count filled before a SETUP, a SETUP answered with an
# error by the candidate; the recorded check.nan stands (sandbox.protocol beside it)
hostile check.nan softmax $H/map_exhaust.c $P
hostile check.nan softmax $H/setup_error.c $P
ok "setup_error.c: the failed SETUP is the candidate's (sandbox.protocol)" grep -q '"sandbox.protocol"' "$json"
# the runner's copy of the tensor tables rewritten from inside (every output pointed at its input):
# the candidate's own memory; the parent judges the outputs it laid out, left unwritten
hostile check.unwritten_output softmax $H/table_rewrite.c $P
# a reason from the candidate's own text (a forged fault line): the wait status decides
hostile sandbox.crash softmax $H/forged_fault.c $P
# a guard band used as scratch and restored before the return: seen mid-call, the process stopped
hostile check.canary softmax $H/front_band.c $P
# a stall on every command but RUN: a deadline per command, seconds (the ci policy's 120 s budget
# and the default's hour before)
t0=$(date +%s)
hostile sandbox.timeout softmax $H/stall_commands.c $P
t1=$(date +%s)
ok "stall_commands.c: timed out within 20 s (took $((t1 - t0)) s)" test $((t1 - t0)) -lt 20

# A task that says terms: reference with a reference that exports no kg_error_terms: not verified
# (exit 3), never a verdict widened or narrowed by guesswork.
mkdir "$tmp/noterms"
grep -v 'cuda: reference.cu' tasks/layernorm/task.yaml >"$tmp/noterms/task.yaml"
cp tasks/layernorm/baseline.py "$tmp/noterms/"
sed '/^\/\* Plain fp32 orders of a row/,$d' tasks/layernorm/reference.c >"$tmp/noterms/reference.c"
"$KGATE" verify "$tmp/noterms/task.yaml" $H/onepass_var.c $P --seed 1 >"$tmp/noterms.out" 2>&1
rc=$?
ok "terms: reference without kg_error_terms: exit 3 naming it (got $rc)" \
	sh -c '[ "$1" = 3 ] && grep -q "kg_error_terms is not exported" "$2"' - "$rc" "$tmp/noterms.out"

echo "false positives (honest rejected): $fp of $n_honest; false negatives (hostile passed or misattributed): $fn of $n_hostile"
finish
