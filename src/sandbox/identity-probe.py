# Lilypad's identity probe: run once per sandbox over a `docker exec` as the agent's user (the
# image's USER or LILYPAD_SANDBOX_USER), before anything of the repository's is in the container.
#
# It reports who the agent is to the engine (uid, gid, supplementary groups, HOME), so that the
# toolbox, started as uid 0, can act as exactly that user and start commands that see the same ids
# and environment; and which python3 the toolbox and the reaper may be started from as uid 0. That
# interpreter must be out of the agent's reach: if the agent could replace it, its standard library,
# a pyvenv.cfg next to it, or put a python3 of its own earlier on PATH (in an image kept after setup,
# where this probe itself is found through PATH), it would run as uid 0 with the right to change
# users. Every such place writable by this user is reported; the host refuses the image then.
import json
import os
import sys


def nearest_existing(path):
    while path and path != "/" and not os.path.lexists(path):
        path = os.path.dirname(path)
    return path or "/"


def chain(path):
    """The path and every directory above it (a directory that does not exist yet: the one that would hold it)."""
    out = []
    path = nearest_existing(os.path.abspath(path))
    while True:
        out.append(path)
        if path == "/":
            return out
        path = os.path.dirname(path)


def writable(paths):
    found = []
    for path in paths:
        for p in chain(path):
            if os.access(p, os.W_OK) and p not in found:
                found.append(p)
    return found


def main():
    exe = sys.executable
    real = os.path.realpath(exe)
    exe_dir = os.path.dirname(exe)
    before = []
    for d in os.environ.get("PATH", "").split(":"):
        if not d:
            continue
        if os.path.abspath(d) in (exe_dir, os.path.dirname(real)):
            break
        before.append(d)
    # /bin/sh starts the toolbox (as uid 0) before python3 does.
    guarded = ["/bin/sh", exe, real] + [p for p in sys.path if p] + before
    print(json.dumps({
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(os.getgroups()),
        "home": os.environ.get("HOME"),
        "python": exe,
        "version": list(sys.version_info[:2]),
        "writable": writable(guarded),
    }))


main()
