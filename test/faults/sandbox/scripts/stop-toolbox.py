# Run as the repository's test command: finds Lilypad's toolbox (by its command line, or by its
# name where the command line cannot be read) and sends it the signal named in argv[1] (STOP or
# KILL), then idles as a test suite would. Prints how many signals went through and how many were
# refused.
import os
import signal
import sys
import time

sig = getattr(signal, "SIG" + sys.argv[1])
hit = refused = 0


def is_toolbox(pid):
    for name, marker in (("cmdline", b"lilypad-toolbox"), ("status", b"Name:\t.lilypad-toolbo")):
        try:
            with open("/proc/%d/%s" % (pid, name), "rb") as fh:
                if marker in fh.read():
                    return True
        except OSError:
            pass
    return False


for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == os.getpid() or not is_toolbox(int(entry)):
        continue
    try:
        os.kill(int(entry), sig)
        hit += 1
    except OSError:
        refused += 1
print("signalled %d toolbox process(es), refused %d" % (hit, refused), flush=True)
time.sleep(1)
print("tests OK")
