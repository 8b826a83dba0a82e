/* status.h: the one list of status codes every vqcheck function returns.
 *
 * Library code never exits: it returns a vqc_status, and where it can say more
 * it records a message with context (file:line, rank, what to do next) in a
 * thread-local "last error" that the caller may print. Only main() turns a
 * status into an exit code (see vqc_status_exit_code and DESIGN.md). */
#ifndef VQC_STATUS_H
#define VQC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, exit_code, message). Exit codes follow DESIGN.md:
 * 1 findings, 2 usage or invalid input, 3 environment or internal error. */
#define VQC_STATUS_LIST(X)                                                   \
  X(OK,          0, "ok")                                                    \
  X(EINVAL,      2, "invalid argument")                                      \
  X(EPARSE,      2, "invalid input file")                                    \
  X(ESHAPE,      2, "shape or stride is not valid for this operation")       \
  X(EDTYPE,      2, "dtype not supported by this operation")                 \
  X(ENOMEM,      3, "out of memory")                                         \
  X(EIO,         3, "I/O error")                                             \
  X(ETIMEOUT,    1, "a wait passed its deadline")                            \
  X(EMISMATCH,   1, "ranks called different collectives")                    \
  X(EABORTED,    1, "the communicator was aborted by another rank")          \
  X(ECOMM,       3, "communication backend error")                           \
  X(ENODEVICE,   3, "no usable GPU device")                                  \
  X(ECUDA,       3, "CUDA error")                                            \
  X(EUNSUPPORTED,3, "not supported by this build or backend")                \
  X(EINTERNAL,   3, "internal error")

typedef enum {
#define VQC_STATUS_ENUM(name, code, msg) VQC_##name,
  VQC_STATUS_LIST(VQC_STATUS_ENUM)
#undef VQC_STATUS_ENUM
  VQC_STATUS_COUNT
} vqc_status;

/* "VQC_ETIMEOUT" etc.; "VQC_UNKNOWN" for values outside the list. */
const char *vqc_status_name(vqc_status s);
/* The generic one-line message for s. */
const char *vqc_status_message(vqc_status s);
/* The process exit code DESIGN.md assigns to s (0 for VQC_OK). */
int vqc_status_exit_code(vqc_status s);

/* Records a formatted message for the calling thread and returns s, so that
 * error paths read `return vqc_error(VQC_EINVAL, "count %zu too large", n);`.
 * The message is prefixed with the caller's file:line. */
#define vqc_error(s, ...) vqc_error_at((s), __FILE__, __LINE__, __VA_ARGS__)
vqc_status vqc_error_at(vqc_status s, const char *file, int line,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The calling thread's last recorded message ("" if none). The pointer stays
 * valid until the thread's next vqc_error. */
const char *vqc_last_error(void);
void vqc_clear_error(void);

/* Propagates a non-OK status to the caller. */
#define VQC_TRY(expr)                                                        \
  do {                                                                       \
    vqc_status vqc_try_s_ = (expr);                                          \
    if (vqc_try_s_ != VQC_OK) return vqc_try_s_;                             \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* VQC_STATUS_H */
