# Lilypad's two users inside the sandbox, shared by toolbox.py and reaper.py (the host puts this
# in front of each).
#
# The host starts the toolbox and the reaper over a `docker exec` as uid 0, holding only the
# CAP_SETUID and CAP_SETGID the container was created with. act_as_agent() makes the process act
# as the agent (effective uid, every gid and the supplementary groups the agent's), so that the
# files it writes are the agent's and it may signal the agent's processes, while it keeps real and
# saved uid 0: no process of the agent's may then signal it, trace it or open its /proc entries.
# Under gVisor that is what refuses the agent its pipes and a trace (gVisor ignores non-dumpable:
# a process of the same uid may open /proc/<pid>/fd/N; the pipes of a root exec are uid 0's). Then
# it gives up every capability. The agent's commands are started with every uid the agent's.

import os

try:
    # Imported while the process is still uid 0: as the agent it might not read the module.
    import ctypes
except ImportError:
    ctypes = None

AGENT_IDS_VAR = "LILYPAD_AGENT_IDS"
PR_SET_DUMPABLE = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def agent_ids():
    """(uid, gid, groups) the host passed as LILYPAD_AGENT_IDS="uid:gid:g1,g2", taken out of the environment."""
    raw = os.environ.pop(AGENT_IDS_VAR, "")
    parts = raw.split(":")
    if len(parts) != 3:
        raise ValueError("%s is %r; expected uid:gid:groups" % (AGENT_IDS_VAR, raw))
    uid, gid = int(parts[0]), int(parts[1])
    if uid == 0:
        raise ValueError("the agent's uid is 0")
    return uid, gid, [int(g) for g in parts[2].split(",") if g]


def drop_capabilities():
    """Empties the permitted, effective and inheritable sets (lowering needs no privilege)."""
    if ctypes is None:
        raise OSError("python3 has no ctypes: cannot give up capabilities")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header = Header(LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "capset: " + os.strerror(err))


def act_as_agent(uid, gid, groups):
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(0, uid, 0)
    drop_capabilities()
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def own_capabilities():
    """The union of this process's permitted, effective, inheritable and ambient sets (0 when none)."""
    held = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.split(":")[0] in ("CapPrm", "CapEff", "CapInh", "CapAmb"):
                held |= int(line.split(":")[1].strip(), 16)
    return held


def status_uids(pid):
    """(real, effective, saved) uid of a process and whether it is a zombie; None if it is gone."""
    uids, zombie = None, False
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("State:"):
                    zombie = line.split()[1:2] == ["Z"]
                elif line.startswith("Uid:"):
                    uids = tuple(int(v) for v in line.split()[1:4])
    except (OSError, ValueError):
        return None
    return (uids, zombie) if uids else None
