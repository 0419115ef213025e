/* The words kgate speaks in reports, policies, manifests and docs, one table each (libuv's
 * UV_ERRNO_MAP style): reason codes, input classes, compute-sanitizer tools, backends. An entry
 * added here exists everywhere at once: the enum, its stable name, its texts and the docs test. */
#ifndef KG_VOCAB_H
#define KG_VOCAB_H

/* Exit class of a reason: a rejection of the candidate, or the host's failure (exit 3). */
#define KG_EXITCLASS_REJECTED 1
#define KG_EXITCLASS_INTERNAL 3

/* XX(ENUM, "dotted.code", exit class, JUnit/report check it belongs to, short text, full text).
 * Codes are stable once shipped: reports, SARIF rules and CI scripts key on them. */
#define KG_REASON_MAP(XX)                                                                                         \
	XX(COMPILE_ERROR, "compile.error", REJECTED, "compile", "The candidate does not compile.",                \
	   "The candidate failed to build in the compile sandbox; the report's compile log holds the compiler's " \
	   "messages.")                                                                                           \
	XX(LOAD_ERROR, "load.error", REJECTED, "correctness",                                                     \
	   "The candidate cannot be loaded (ABI mismatch or missing kg_forward).",                                \
	   "The runner could not load the built candidate: it does not export kg_abi_version with the ABI "       \
	   "version kgate speaks, or kg_forward is missing, or the dynamic loader refused it.")                   \
	XX(STATIC_FORBIDDEN_SYMBOL, "static.forbidden_symbol", REJECTED, "static-imports",                        \
	   "The candidate imports a symbol the policy does not allow.",                                            \
	   "The built candidate imports a dynamic symbol outside the policy's allowlist and its backend's "       \
	   "(dlsym, mprotect, fopen, socket, ...).")                                                              \
	XX(STATIC_FORBIDDEN_LIBRARY, "static.forbidden_library", REJECTED, "static-imports",                      \
	   "The candidate links a library the policy does not allow.",                                             \
	   "The built candidate needs a shared library (DT_NEEDED) outside the policy's allowlist and its "       \
	   "backend's.")                                                                                          \
	XX(SANDBOX_SYSCALL, "sandbox.syscall", REJECTED, "correctness",                                           \
	   "The candidate made a system call its sandbox denies.",                                                \
	   "The candidate's process made a system call that its sandbox's seccomp filter does not allow; the "    \
	   "call and its arguments are named.")                                                                   \
	XX(SANDBOX_TIMEOUT, "sandbox.timeout", REJECTED, "correctness",                                           \
	   "The candidate exceeded its wall-clock limit.",                                                        \
	   "A call of the candidate ran past its deadline (derived from the reference's time) or the session "   \
	   "past the policy's wall-clock budget, and its process tree was killed.")                               \
	XX(SANDBOX_MEMORY, "sandbox.memory", REJECTED, "correctness", "The candidate exceeded its memory limit.",  \
	   "The candidate asked for a mapping larger than the policy's memory bound, or the cgroup's memory "     \
	   "limit killed it.")                                                                                    \
	XX(SANDBOX_CRASH, "sandbox.crash", REJECTED, "correctness",                                               \
	   "The candidate's process crashed or its kernel faulted.",                                              \
	   "The candidate's process died from a signal, or its device kernel faulted and left the context "      \
	   "unusable.")                                                                                           \
	XX(SANDBOX_OUTPUT_LIMIT, "sandbox.output_limit", REJECTED, "correctness",                                 \
	   "The candidate printed more than the output limit.",                                                   \
	   "The candidate's process wrote more to stdout and stderr than the sandbox allows, and was killed.")    \
	XX(SANDBOX_DLOPEN, "sandbox.dlopen", REJECTED, "correctness",                                             \
	   "The candidate loaded a library or mapped new code after it was loaded.",                              \
	   "Once the candidate is loaded its runner is sealed: no file opens and no new executable mappings. "    \
	   "The candidate opened a file (a dlopen found at run time) or mapped executable memory (a JIT), and "   \
	   "the seal ended its process.")                                                                         \
	XX(SANDBOX_PROTOCOL, "sandbox.protocol", REJECTED, "correctness",                                         \
	   "The candidate's process broke the control protocol.",                                                 \
	   "Something in the candidate's process answered the parent out of turn (a second, early, malformed "   \
	   "or out-of-order message on the control channel) or failed a command the parent gave its runner; "    \
	   "what the runner said is quoted as its claim.")                                                       \
	XX(SANDBOX_THREAD, "sandbox.thread", REJECTED, "correctness",                                             \
	   "The candidate's process ran a thread it may not.",                                                    \
	   "Counted from outside while the process was stopped: the loader thread, on which the candidate's "    \
	   "constructors ran, outlived the load, or a thread the policy does not allow was running.")            \
	XX(SANDBOX_TAMPER, "sandbox.tamper", REJECTED, "correctness",                                             \
	   "The candidate tried to change the rules of its own process.",                                         \
	   "After it was loaded, the candidate stacked a seccomp filter or tried to change a sealed mapping "   \
	   "(the runner's code, its measurement state, a guard page, a read-only input) with mprotect, munmap, " \
	   "mremap, madvise or mmap(MAP_FIXED); the supervisor refused the call and ended the process.")        \
	XX(SANDBOX_SETUP, "sandbox.setup", INTERNAL, "correctness",                                               \
	   "A sandbox layer that the policy requires could not be set up.",                                       \
	   "This host cannot build a sandbox layer that the policy requires; nothing of the candidate ran. The "  \
	   "host's failure, not the candidate's (exit 3).")                                                       \
	XX(CHECK_MISMATCH, "check.mismatch", REJECTED, "correctness",                                             \
	   "An output differs from the trusted reference beyond the tolerance.",                                  \
	   "An output element differs from the trusted reference's by more than atol + rtol*|expected|; the "     \
	   "first such element, the input class, the seed and the shape are given.")                             \
	XX(CHECK_NAN, "check.nan", REJECTED, "correctness", "An output holds NaN where the reference holds a number.", \
	   "The first wrong output element is NaN where the reference computed a number.")                        \
	XX(CHECK_CANARY, "check.canary", REJECTED, "correctness",                                                 \
	   "A write landed in a guard band around a buffer (out of bounds).",                                     \
	   "A guard band before or after a tensor was overwritten: the candidate wrote out of bounds; the "       \
	   "tensor and the byte distance from its edge are given.")                                               \
	XX(CHECK_INPUT_MODIFIED, "check.input_modified", REJECTED, "correctness",                                 \
	   "The candidate modified an input tensor.", "An input tensor differs from what kgate generated after "  \
	   "the call: inputs are read-only.")                                                                     \
	XX(CHECK_UNWRITTEN_OUTPUT, "check.unwritten_output", REJECTED, "correctness",                             \
	   "Part of an output was never written.",                                                                \
	   "An output element still holds the poison pattern kgate wrote before the call: the candidate left it " \
	   "unwritten (or relied on memory from an earlier call).")                                               \
	XX(CHECK_CONSTANT_OUTPUT, "check.constant_output", REJECTED, "correctness",                               \
	   "The output does not depend on the input.",                                                            \
	   "A wrong output stayed bit-identical while the inputs changed: the candidate returns a constant or a " \
	   "cached value.")                                                                                       \
	XX(CHECK_INPUT_PASSTHROUGH, "check.input_passthrough", REJECTED, "correctness",                           \
	   "An output is a copy of an input.", "A wrong output is a byte-for-byte copy of an input.")             \
	XX(CHECK_SHAPE_VARIANT, "check.shape_variant", REJECTED, "correctness",                                   \
	   "The candidate is wrong at a shape other than the nominal one.",                                       \
	   "The candidate is wrong (mismatch, NaN or unwritten output) at a variant shape, not at the base "      \
	   "shape: it handles only some sizes.")                                                                  \
	XX(CHECK_STALE_RESULT, "check.stale_result", REJECTED, "timing",                                          \
	   "A timed call returned a result that does not match its fresh inputs.",                                \
	   "A timed call's output does not match the reference on that call's fresh inputs: a result cached "    \
	   "across calls, or a different kernel while timed.")                                                    \
	XX(CHECK_ASYNC_ESCAPE, "check.async_escape", REJECTED, "correctness",                                     \
	   "Outputs changed after kg_forward returned: work escaped the call.",                                   \
	   "Work ran outside the call: outputs changed after kg_forward returned, or the device stayed busy "     \
	   "after the given stream was done (another stream, a thread).")                                         \
	XX(CHECK_RETURN_CODE, "check.return_code", REJECTED, "correctness", "kg_forward returned an error.",       \
	   "kg_forward returned a non-zero status.")                                                              \
	XX(CHECK_DEGENERATE, "check.degenerate", REJECTED, "correctness",                                         \
	   "The trials cannot distinguish a real kernel from a constant.",                                        \
	   "Every trial's reference output is near-constant under the tolerance, so a constant would pass: the "  \
	   "trials are no evidence (widen the classes or tighten the tolerance).")                                \
	XX(CHECK_MEMCHECK, "check.memcheck", REJECTED, "memcheck",                                                \
	   "compute-sanitizer memcheck found an invalid memory access.",                                          \
	   "compute-sanitizer memcheck found an invalid memory access (past a tensor's end, misaligned, a "       \
	   "device fault); its first report is quoted.")                                                          \
	XX(CHECK_RACECHECK, "check.racecheck", REJECTED, "racecheck",                                             \
	   "compute-sanitizer racecheck found a shared-memory data race.",                                        \
	   "compute-sanitizer racecheck found a shared-memory data race between threads of a block; its first "   \
	   "report is quoted.")                                                                                   \
	XX(CHECK_SYNCCHECK, "check.synccheck", REJECTED, "synccheck",                                             \
	   "compute-sanitizer synccheck found a barrier that not every thread reaches.",                          \
	   "compute-sanitizer synccheck found a synchronisation hazard (a barrier that not every thread of the "  \
	   "block reaches); its first report is quoted.")                                                         \
	XX(CHECK_INITCHECK, "check.initcheck", REJECTED, "initcheck",                                             \
	   "compute-sanitizer initcheck found a read of device memory that was never written.",                   \
	   "compute-sanitizer initcheck found a read of device memory that nobody wrote; its first report is "    \
	   "quoted.")                                                                                             \
	XX(TIMING_TAMPERED, "timing.tampered", REJECTED, "timing",                                                \
	   "The candidate's timing claim contradicts the parent's own clock.",                                    \
	   "What the candidate's runner reported about a timed call contradicts what the trusted parent "         \
	   "observed, or messages on the control channel were forged.")                                           \
	XX(TIMING_TOO_SLOW, "timing.too_slow", REJECTED, "timing",                                                \
	   "The candidate is slower than the policy's speed gate.",                                               \
	   "The candidate's speedup over the reference is below the policy's timing.min_speedup.")

enum kg_reason_code {
#define KG_XX(e, name, cls, check, short_text, full_text) KG_R_##e,
	KG_REASON_MAP(KG_XX)
#undef KG_XX
	KG_R_COUNT_
};

const char *kg_reason_name(enum kg_reason_code c); /* "check.mismatch"; "?" when out of range */
int kg_reason_parse(const char *name, enum kg_reason_code *out); /* -EINVAL when unknown */
int kg_reason_exit(enum kg_reason_code c); /* KG_EXITCLASS_* */
const char *kg_reason_check(enum kg_reason_code c); /* the check it belongs to: "correctness" */
const char *kg_reason_short(enum kg_reason_code c);
const char *kg_reason_full(enum kg_reason_code c);

/* XX(ENUM, "name", seeded, description). Order is the order trials run in and reports list.
 * seeded: 1 when a class's activations depend on the trial's key (two trials never share them),
 * 0 when they are the same in every trial (zeros, ones, identity): those hold no secret, so timed
 * calls never draw them and no row of a mixed tensor is one of them. */
#define KG_INPUT_CLASS_MAP(XX)                                                                           \
	XX(NORMAL, "normal", 1, "normal distribution, random offset and scale")                          \
	XX(UNIFORM, "uniform", 1, "uniform distribution, random offset and scale")                       \
	XX(LARGE, "large", 1, "large magnitudes (1e3..1e4 for f32; near the top of the range for f16)")   \
	XX(TINY, "tiny", 1, "tiny values and denormals")                                                  \
	XX(ZEROS, "zeros", 0, "all zeros (weights and biases stay random)")                               \
	XX(ONES, "ones", 0, "all ones (weights and biases stay random)")                                  \
	XX(NEGATIVE, "negative", 1, "negative values only")                                               \
	XX(SPECIAL, "special", 1, "NaN and Inf sprinkled in; only where the task defines them")           \
	XX(IDENTITY, "identity", 0, "identity matrices for square 2-D activations, normal elsewhere")     \
	XX(SORTED, "sorted", 1, "ascending along the last dimension")                                     \
	XX(LARGE_MEAN, "large_mean", 1, "unit spread around a mean far from zero (one-pass variance breaks)") \
	XX(CONSTANT_ROWS, "constant_rows", 1, "every row (last dimension) one value, a different one per row") \
	XX(NEAR_DUPLICATE, "near_duplicate", 1, "rows equal to one base row but for a few moved elements") \
	XX(SPIKED, "spiked", 1, "small values with one large finite outlier per row at a secret position") \
	XX(MIXED, "mixed", 1, "each row drawn from another class, the classes at secret rows")

enum kg_input_class {
#define KG_XX(e, name, seeded, desc) KG_CLASS_##e,
	KG_INPUT_CLASS_MAP(KG_XX)
#undef KG_XX
	KG_CLASS_COUNT_
};
#define KG_CLASS_ALL ((1u << KG_CLASS_COUNT_) - 1)

const char *kg_class_name(enum kg_input_class c);
const char *kg_class_description(enum kg_input_class c);
int kg_class_parse(const char *name, enum kg_input_class *out); /* -EINVAL when unknown */
/* 1 when class c's activations depend on the trial's key (the table's seeded column); 0 for the
 * classes that are the same in every trial, and out of range */
int kg_class_is_seeded(enum kg_input_class c);

/* XX(ENUM, "name", reason code of its findings, what it finds). */
#define KG_SANITIZER_TOOL_MAP(XX)                                                                   \
	XX(MEMCHECK, "memcheck", CHECK_MEMCHECK, "out-of-bounds and misaligned accesses, device faults") \
	XX(RACECHECK, "racecheck", CHECK_RACECHECK, "shared-memory hazards between threads of a block")  \
	XX(SYNCCHECK, "synccheck", CHECK_SYNCCHECK, "barriers that not every thread reaches")            \
	XX(INITCHECK, "initcheck", CHECK_INITCHECK, "reads of device memory nobody wrote")

enum kg_sanitizer_tool {
#define KG_XX(e, name, code, desc) KG_SAN_##e,
	KG_SANITIZER_TOOL_MAP(KG_XX)
#undef KG_XX
	KG_SAN_COUNT_
};

const char *kg_sanitizer_tool_name(enum kg_sanitizer_tool t);
int kg_sanitizer_tool_parse(const char *name, enum kg_sanitizer_tool *out);
enum kg_reason_code kg_sanitizer_tool_reason(enum kg_sanitizer_tool t);

/* XX(ENUM, "name", source file extension, the task manifest's reference key); torch runs a
 * KernelBench-format module's Model as a trusted reference, and a ModelNew module as a candidate
 * for such a task (its load_inline extensions built by kgate before it runs). What each
 * backend needs on the trusted side (compiler, sandbox data, allowlists, GPU probe) is the
 * verifier's backend table (verifier/plan/backend.c). */
#define KG_BACKEND_MAP(XX)          \
	XX(CPU, "cpu", ".c", "c") \
	XX(CUDA, "cuda", ".cu", "cuda") \
	XX(TORCH, "torch", ".py", "torch")

enum kg_backend_id {
#define KG_XX(e, name, ext, ref_key) KG_BACKEND_##e,
	KG_BACKEND_MAP(KG_XX)
#undef KG_XX
	KG_BACKEND_COUNT_
};

const char *kg_backend_name(enum kg_backend_id b);
const char *kg_backend_ext(enum kg_backend_id b);
const char *kg_backend_ref_key(enum kg_backend_id b); /* "c": reference.c in a manifest */
int kg_backend_parse(const char *name, enum kg_backend_id *out); /* -EINVAL when unknown */
/* The backend whose extension the path ends in; -EINVAL when none. */
int kg_backend_for_path(const char *path, enum kg_backend_id *out);
/* "cpu, cuda": every name of a table, for error messages. */
const char *kg_backend_names(void);
const char *kg_class_names(void);
const char *kg_sanitizer_tool_names(void);

#endif
