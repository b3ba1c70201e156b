# Lilypad's reaper: kills every process of the agent's uid in the sandbox, then checks /proc.
#
# Run by the host as a fresh `docker exec` under the agent's uid before anything the host trusts
# (setup results, test runs, the patch, a new toolbox). kill(-1, SIGKILL) signals every process
# this uid may signal except the caller, and the kernel does it under the task-list lock, so a
# fork bomb cannot outrun it; the loop only waits for the dying to leave /proc.
# Prints one JSON line: {"killed": <processes seen>, "left": <still alive>, "uid": <uid>}.
import json
import os
import signal
import time


def hide():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except Exception:
        pass


def same_uid(pid, uid):
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return str(uid) in line.split()[1:]
    except (OSError, ValueError):
        return False
    return False


def alive(me, uid):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me and same_uid(int(entry), uid):
            pids.append(int(entry))
    return pids


def main():
    hide()
    me, uid = os.getpid(), os.getuid()
    seen = set()
    deadline = time.monotonic() + 10
    left = alive(me, uid)
    while left and time.monotonic() < deadline:
        seen.update(left)
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.01)
        left = alive(me, uid)
    print(json.dumps({"killed": len(seen), "left": len(left), "uid": uid}))


main()
