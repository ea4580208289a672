/*
 * init_child.h - run cci_init in a forked child, as a fresh process would,
 * with CCI_CONFIG and CCI_CTP set as the test says, and collect what the
 * child prints and its stderr.  The configuration is read once per
 * process, so every case of the config suites runs in a child of its own.
 */
#ifndef CCI_TEST_INIT_CHILD_H
#define CCI_TEST_INIT_CHILD_H

struct child_result {
	int rc;          /* the child's exit code: its body's choice, cci_init's status */
	char out[4096];  /* what the body wrote on its out_fd */
	char err[8192];  /* the child's stderr */
};

/*
 * Write text (unless NULL) into path, then fork a child with
 * CCI_CONFIG=path (unset for NULL) and CCI_CTP=ctp (unset for NULL) that
 * runs body(out_fd), which must _exit.  CUnit-FATAL on a failed fork or
 * pipe.
 */
void init_child_run(const char *path, const char *text, const char *ctp,
                    void (*body)(int out_fd), struct child_result *r);

#endif /* CCI_TEST_INIT_CHILD_H */
