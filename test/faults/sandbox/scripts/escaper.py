# A daemon that tries every trick to outlive Lilypad's clean-up: double fork, a new session, no
# call marker in its environment, non-dumpable (so /proc/<pid>/environ is closed), a new name,
# SIGTERM ignored. It appends a tick to /testbed/ticks every 20 ms.
import ctypes
import os
import signal
import time

if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.environ.pop("LILYPAD_CALL_ID", None)
libc = ctypes.CDLL(None)
libc.prctl(4, 0, 0, 0, 0)
libc.prctl(15, b"kworker/0:1", 0, 0, 0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for fd in (0, 1, 2):
    try:
        os.close(fd)
    except OSError:
        pass
while True:
    with open("/testbed/ticks", "a") as fh:
        fh.write("tick\n")
    time.sleep(0.02)
