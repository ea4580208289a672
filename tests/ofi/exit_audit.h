/*
 * exit_audit.h - what t_exit.c and its audit module (exit_audit.c) agree on.
 */
#ifndef OFI_TEST_EXIT_AUDIT_H
#define OFI_TEST_EXIT_AUDIT_H

/* The child's exit status when a handler other than the application's
 * was still installed after libfabric's destructor. */
#define EXIT_AUDIT_STILL_HANDLED 3
/* The environment variable that names the audit module for t_exit.c
 * (meson.build sets it). */
#define EXIT_AUDIT_ENV "OFI_TEST_EXIT_AUDIT"
/* The argument that makes ofi_test the child of t_exit.c. */
#define EXIT_AUDIT_CHILD_ARG "--exit-child"

#endif /* OFI_TEST_EXIT_AUDIT_H */
