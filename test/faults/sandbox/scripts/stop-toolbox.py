# Run as the repository's test command: finds Lilypad's toolbox and sends it the signal named in
# argv[1] (STOP or KILL), then idles as a test suite would.
import os
import signal
import sys
import time

sig = getattr(signal, "SIG" + sys.argv[1])
hit = 0
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == os.getpid():
        continue
    try:
        with open("/proc/%s/cmdline" % entry, "rb") as fh:
            if b"lilypad-toolbox" in fh.read():
                os.kill(int(entry), sig)
                hit += 1
    except OSError:
        pass
print("signalled %d toolbox process(es)" % hit, flush=True)
time.sleep(3)
print("tests OK")
