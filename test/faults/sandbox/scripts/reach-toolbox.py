# Run by the agent (a Bash call) with the toolbox's pid (its $PPID): tries every way a process of
# the agent's user could reach Lilypad's toolbox, and prints one line per try, "<try> refused (<why>)"
# or "<try> ALLOWED". Signals that would hurt come last, so an allowed one still lets the others print.
import ctypes
import errno
import os
import signal
import sys

pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
SYS_PIDFD_GETFD = 438  # x86_64


def report(name, fn):
    try:
        fn()
    except OSError as e:
        print("%s refused (%s)" % (name, errno.errorcode.get(e.errno, e.errno)), flush=True)
        return
    print("%s ALLOWED" % name, flush=True)


def ptrace_attach():
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    libc.ptrace(PTRACE_DETACH, pid, None, None)


def steal_fd():
    pidfd = os.pidfd_open(pid)
    try:
        fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, 1, 0)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        os.close(fd)
    finally:
        os.close(pidfd)


def opens(path, flags):
    return lambda: os.close(os.open(path, flags))


report("open /proc/<toolbox>/fd/0", opens("/proc/%d/fd/0" % pid, os.O_RDONLY | os.O_NONBLOCK))
report("open /proc/<toolbox>/fd/1", opens("/proc/%d/fd/1" % pid, os.O_WRONLY | os.O_NONBLOCK))
report("open /proc/<toolbox>/mem", opens("/proc/%d/mem" % pid, os.O_RDONLY))
report("ptrace attach", ptrace_attach)
report("pidfd_getfd of fd 1", steal_fd)
report("signal 0", lambda: os.kill(pid, 0))
report("SIGSTOP", lambda: os.kill(pid, signal.SIGSTOP))
report("SIGKILL", lambda: os.kill(pid, signal.SIGKILL))
