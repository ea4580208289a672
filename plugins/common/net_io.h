/*
 * net_io.h - the socket I/O of the IP transports (tcp, sock): raw system calls
 * rather than the libc wrappers, because these are not cancellation points
 * (a thread cancelled inside the library would leave its locks held), and
 * they skip the cancellation bookkeeping libc adds to every call once a
 * process has threads, which is measurable on a polled path that makes one
 * call per message.
 */
#ifndef CCI_NET_IO_H
#define CCI_NET_IO_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static inline ssize_t net_recv(int fd, void *buf, size_t len, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t net_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t net_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	return syscall(SYS_sendmsg, fd, mh, flags);
}

#endif /* CCI_NET_IO_H */
