# Lilypad's reaper: kills every process of the agent's uid in the sandbox, then checks /proc.
#
# Run by the host as a fresh `docker exec` as uid 0 (agent-user.py comes first) before anything the
# host trusts (setup results, test runs, the patch, a new toolbox). First it kills every earlier
# toolbox (real uid 0, acting as the agent: a toolbox the agent wedged, or one mid-way through
# starting a command), which the agent's uid may not signal. Then it takes the agent's real and
# effective uid: kill(-1, SIGKILL) signals every process this uid may signal except the caller, and the
# kernel does it under the task-list lock, so a fork bomb cannot outrun it; the loop only waits for
# the dying to leave /proc. Zombies are not counted: they hold nothing and cannot act.
# Prints one JSON line: {"killed": <processes seen>, "left": <still alive>, "uid": <agent uid>}.
import json
import signal
import time


def alive(me, uid):
    """Pids of every live process that has the agent's uid as its real, effective or saved uid."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        found = status_uids(int(entry))
        if found and not found[1] and uid in found[0]:
            pids.append(int(entry))
    return pids


def stale_toolboxes(me, uid):
    return [pid for pid in alive(me, uid) if status_uids(pid) and status_uids(pid)[0][0] == 0]


def main():
    uid, gid, groups = agent_ids()
    act_as_agent(uid, gid, groups)
    me = os.getpid()
    seen = set()
    deadline = time.monotonic() + 10
    # Real uid 0 may signal another real uid 0; each is killed by pid, never with kill(-1), which
    # would reach the container's own init and end the container.
    stale = stale_toolboxes(me, uid)
    while stale and time.monotonic() < deadline:
        seen.update(stale)
        for pid in stale:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
        stale = stale_toolboxes(me, uid)
    # Real uid the agent's, so that kill(-1) reaches the agent's processes and nothing of uid 0;
    # saved uid 0 keeps this process untraceable by them (gVisor ignores non-dumpable), so none
    # can make it skip the kill or print another count.
    os.setresuid(uid, uid, 0)
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
