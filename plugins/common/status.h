/*
 * status.h - one mapping from a system error to a CCI status, so the same
 * errno means the same thing whichever transport met it.
 */
#ifndef CCI_COMMON_STATUS_H
#define CCI_COMMON_STATUS_H

/*
 * The cci_status_t for err, an errno value (libfabric's FI_E* codes below
 * 256 are errno values too, and are accepted as such; its own codes and
 * the meaning it gives EACCES, a refused RMA key, are the ofi plugin's).
 * An error with no closer status is CCI_ERROR; 0 is CCI_SUCCESS.
 */
int cci__errno_status(int err);

#endif /* CCI_COMMON_STATUS_H */
