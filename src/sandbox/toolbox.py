# Lilypad's in-container toolbox.
#
# Started once per sandbox over a single `docker exec` and kept open: the host writes one JSON
# request per line on stdin and reads one JSON response per line on stdout. Keeping one session
# open is what makes a tool call cost about a millisecond instead of a `docker exec` (~50 ms).
#
# The five Leaf tools (Read, Write, Edit, Glob, Bash) are implemented here, inside the container,
# so they only ever see the container's filesystem. Their observation texts follow the Leaf
# reference byte for byte; the reference is Python, which is why this helper is Python too: error
# texts such as "FileNotFoundError: [Errno 2] ..." and str.splitlines() come out identical.
#
# Compatible with Python 3.6+ (evaluation images often ship old interpreters).
#
# The host starts it as uid 0 and puts agent-user.py in front of it: main() first makes it act as
# the agent with real and saved uid 0 (see there), and every command it starts runs with every uid
# the agent's.

import base64
import codecs
import glob as globmod
import io
import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import time

READ_LIMIT = 20000
BASH_LIMIT = 30000
GLOB_LIMIT = 1000

REPO = os.environ.get("LILYPAD_REPO_DIR", "/testbed")
TRUTHY = ("1", "true", "yes", "on")
PR_GET_DUMPABLE = 3
# What main() made of this process: the agent's ids, or why it could not become them.
IDENTITY = {"uid": None, "gid": None, "groups": [], "error": None}


class ToolInputError(Exception):
    pass


def truncate(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[truncated %d chars]" % (len(text) - limit)


def parse_arguments(raw):
    # Arguments that are not valid JSON, or not a JSON object, are treated as {}.
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except Exception:
        return {}
    return value if isinstance(value, dict) else {}


def resolve(path):
    # Relative paths are relative to the repository, as in the reference: no "~" expansion
    # (a leading "~" is an ordinary directory name there).
    return path if os.path.isabs(path) else os.path.join(REPO, path)


def display_path(abs_path, given, root=None):
    try:
        real = os.path.realpath(abs_path)
        root = root or os.path.realpath(REPO)
    except Exception:
        return given
    return relative_display(real, given, root)


def relative_display(real, given, root):
    if real == root:
        return "."
    prefix = root.rstrip("/") + "/"
    if real.startswith(prefix):
        return real[len(prefix):]
    return given


def file_path_arg(args):
    value = args.get("file_path")
    if value is None or value == "":
        value = args.get("path")
    if value is None or value == "":
        raise ToolInputError("ValueError: file_path is required")
    return str(value)


def to_int(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return None


# ---------------------------------------------------------------- Read

def require_regular(path):
    # Devices, pipes and sockets would block the toolbox or never end (/dev/zero, a FIFO).
    if os.path.exists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        raise ToolInputError("OSError: [Errno 22] Not a regular file: %r" % (path,))


def tool_read(args):
    given = file_path_arg(args)
    path = resolve(given)
    require_regular(path)
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.decode("utf-8", errors="replace").splitlines()
    offset = to_int(args.get("offset"))
    limit = to_int(args.get("limit"))
    start = 1 if offset is None or offset < 1 else offset
    end = len(lines) if limit is None or limit <= 0 else min(len(lines), start - 1 + limit)
    numbered = ["%d. %s" % (n, lines[n - 1]) for n in range(start, end + 1)]
    return truncate(display_path(path, given) + "\n" + "\n".join(numbered), READ_LIMIT)


# ---------------------------------------------------------------- line endings

def dominant_newline(text):
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    if crlf == 0 and cr == 0:
        return "\n"
    best = max((crlf, "\r\n"), (lf, "\n"), (cr, "\r"))
    return best[1]


def with_newline(text, eol):
    # Text the model writes uses "\n"; put it in the file's own line-ending style.
    if eol == "\n":
        return text
    return text.replace("\r\n", "\n").replace("\n", eol)


# ---------------------------------------------------------------- Write

def write_file(path, data):
    """open(path, "wb").write(data), without the truncation to zero first.

    On ext4 (the engine's usual disk) a file truncated to zero and written again is flushed to
    disk when it is closed (auto_da_alloc), which made every Edit and Write cost ~0.4 ms. Writing
    over the old bytes and cutting the file to length gives the same file; a write that fails
    part way leaves what open(path, "wb") would have left: the part written.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(fd, view[written:])
        finally:
            os.ftruncate(fd, written)
    finally:
        os.close(fd)


def tool_write(args):
    given = file_path_arg(args)
    if "content" not in args:
        raise ToolInputError("ValueError: content is required")
    content = args.get("content")
    content = "" if content is None else content if isinstance(content, str) else json.dumps(content)
    path = resolve(given)
    require_regular(path)
    data = content
    if os.path.isfile(path):
        try:
            with open(path, "rb") as fh:
                old = fh.read().decode("utf-8")
            data = with_newline(content, dominant_newline(old))
        except (UnicodeDecodeError, OSError):
            data = content
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    write_file(path, data.encode("utf-8", errors="surrogatepass"))
    return "Wrote %s (%d bytes)." % (display_path(path, given), len(content))


# ---------------------------------------------------------------- Edit

NEWLINE_ANY = "(?:\r\n|\r|\n)"


def tool_edit(args):
    given = file_path_arg(args)
    old = args.get("old_string")
    if old is None:
        raise ToolInputError("ValueError: old_string is required")
    old = old if isinstance(old, str) else str(old)
    if old == "":
        raise ToolInputError("ValueError: old_string must be non-empty")
    new = args.get("new_string")
    new = "" if new is None else new if isinstance(new, str) else str(new)
    flag = args.get("replace_all")
    replace_all = flag is True or (isinstance(flag, str) and flag.strip().lower() in TRUTHY)

    path = resolve(given)
    require_regular(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    # Refuse instead of rewriting undecodable bytes as U+FFFD (the reference's quirk).
    text = raw.decode("utf-8")

    # The reference matches against the text with line endings turned into "\n"; match the same
    # way here but on the original text, so the file keeps its own line endings.
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    count = 0 if "\r" in old else normalized.count(old)
    if count == 0:
        raise ToolInputError("ValueError: old_string was not found")
    if count > 1 and not replace_all:
        raise ToolInputError(
            "ValueError: old_string matched %d times; set replace_all=true or use a more specific old_string" % count
        )
    eol = dominant_newline(text)
    replacement = with_newline(new, eol)
    pattern = re.compile(NEWLINE_ANY.join(re.escape(part) for part in old.split("\n")))
    updated, done = pattern.subn(lambda _m: replacement, text, count=0 if replace_all else 1)
    if done != (count if replace_all else 1):
        # Should not happen; fall back to the reference's behaviour in the file's dominant style.
        updated = with_newline(normalized.replace(old, new) if replace_all else normalized.replace(old, new, 1), eol)
        done = count if replace_all else 1
    write_file(path, updated.encode("utf-8", errors="surrogatepass"))
    noun = "replacement" if done == 1 else "replacements"
    return "Edited %s (%d %s)." % (display_path(path, given), done, noun)


# ---------------------------------------------------------------- Glob

def tool_glob(args):
    pattern = args.get("pattern")
    if pattern is None or pattern == "":
        raise ToolInputError("ValueError: pattern is required")
    pattern = str(pattern)
    base_given = args.get("path")
    base = resolve(str(base_given)) if base_given not in (None, "") else REPO
    if os.path.isabs(pattern):
        matches = globmod.glob(pattern, recursive=True)
    elif sys.version_info >= (3, 10):
        matches = [os.path.join(base, m) for m in globmod.glob(pattern, root_dir=base, recursive=True)]
    else:
        matches = globmod.glob(os.path.join(glob_escape(base), pattern), recursive=True)
    files = sorted(file_display_paths(matches, os.path.realpath(REPO)))
    if not files:
        return "No files matched."
    shown = files[:GLOB_LIMIT]
    out = "\n".join(shown)
    if len(files) > GLOB_LIMIT:
        out += "\n... %d more files" % (len(files) - GLOB_LIMIT)
    return out


def file_display_paths(matches, root):
    """display_path() of each match that os.path.isfile() accepts, without a syscall per match.

    realpath() of every match (an lstat per path component, in Python) was most of a Glob call.
    The matches' directories are listed once each (the entry types come with the listing) and
    resolved once each; a match that is a plain file resolves to its directory's real path plus
    its name. Symlinks, and anything the listing does not show, take the full route.
    """
    by_head = {}
    for m in matches:
        head, _, name = m.rpartition("/")
        by_head.setdefault(head, []).append((m, name))
    prefix = root.rstrip("/") + "/"
    for head, entries in by_head.items():
        kinds = dir_entry_kinds(head) if head and len(entries) > 1 else {}
        real_head = None
        for m, name in entries:
            kind = kinds.get(name)
            if kind is None:
                kind = lstat_kind(m)
            if kind == "file" and head and name not in (".", ".."):
                if real_head is None:
                    real_head = os.path.realpath(head)
                real = real_head.rstrip("/") + "/" + name
                yield "." if real == root else real[len(prefix):] if real.startswith(prefix) else m
            elif kind == "file" or (kind == "link" and os.path.isfile(m)):
                yield display_path(m, m, root)


def dir_entry_kinds(path):
    """"file", "link" or "other" for each entry of a directory, from one listing; {} if unlistable."""
    kinds = {}
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    kinds[entry.name] = "link" if entry.is_symlink() else "file" if entry.is_file(follow_symlinks=False) else "other"
                except OSError:
                    pass
    except OSError:
        return {}
    return kinds


def lstat_kind(path):
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return "link" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "other"


def glob_escape(path):
    return globmod.escape(path)


# ---------------------------------------------------------------- Bash

class StreamCapture:
    """Keeps a bounded head of one output stream and counts what it drops."""

    def __init__(self, keep_chars):
        self.keep = keep_chars
        self.raw_head = bytearray()
        self.raw_cap = keep_chars * 4 + 8
        self.text_decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder("utf-8")("replace"), True)
        self.keep_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text_chars = 0
        self.keep_chars = 0
        self.text_parts = []
        self.text_len = 0
        self.keep_parts = []
        self.keep_len = 0
        self.total_bytes = 0

    def feed(self, chunk, final=False):
        self.total_bytes += len(chunk)
        if len(self.raw_head) < self.raw_cap:
            self.raw_head.extend(chunk[: self.raw_cap - len(self.raw_head)])
        text = self.text_decoder.decode(chunk, final)
        self.text_chars += len(text)
        if self.text_len < self.keep:
            self.text_parts.append(text[: self.keep - self.text_len])
            self.text_len += len(self.text_parts[-1])
        kept = self.keep_decoder.decode(chunk, final)
        self.keep_chars += len(kept)
        if self.keep_len < self.keep:
            self.keep_parts.append(kept[: self.keep - self.keep_len])
            self.keep_len += len(self.keep_parts[-1])

    def text(self):
        return "".join(self.text_parts), self.text_chars

    def verbatim(self):
        return "".join(self.keep_parts), self.keep_chars


CALL_SEQ = [0]


def kill_call(marker, pgid):
    """Kill the command's process group and every process that inherited its marker."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    # Reading another process's environ takes the ptrace access check, which gVisor makes with the
    # caller's real uid (0 here): the search runs in a child with the agent's real uid. It keeps
    # saved uid 0, so that no process of the agent's may trace it (gVisor ignores non-dumpable), and
    # holds nothing of the host's channel.
    uid = IDENTITY["uid"]
    try:
        child = os.fork()
    except OSError:
        # No process to spare (a fork bomb at the pids limit): search from here, where the kernel
        # checks the effective uid (under runc this finds them; gVisor may refuse the environ).
        kill_marked(marker)
        return
    if child == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.setresuid(uid, uid, 0)
            kill_marked(marker)
        finally:
            os._exit(0)
    while True:
        try:
            os.waitpid(child, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def kill_marked(marker):
    needle = marker.encode() + b"\0"
    me = os.getpid()
    for _ in range(200):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open("/proc/%s/environ" % entry, "rb") as fh:
                    env = fh.read()
            except OSError:
                continue
            if needle in env:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.01)


def as_agent():
    """Popen arguments that start the command with every uid the agent's (real and saved too).

    The toolbox's groups and gids are already the agent's, and the agent's uid is its effective
    one, so the child may take it without a capability. Python 3.9+ does it in C after the fork;
    older ones through preexec_fn.
    """
    uid = IDENTITY["uid"]
    if uid is None:
        raise RuntimeError("the toolbox does not act as the agent: %s" % IDENTITY["error"])
    if sys.version_info >= (3, 9):
        return {"user": uid}
    return {"preexec_fn": lambda: os.setresuid(uid, uid, uid)}


def run_process(argv, timeout, keep_chars, cwd, env_extra=None):
    """Runs argv with empty stdin; returns (returncode, timed_out, out_capture, err_capture, elapsed)."""
    CALL_SEQ[0] += 1
    marker = "LILYPAD_CALL_ID=%d-%d" % (os.getpid(), CALL_SEQ[0])
    env = dict(os.environ)
    env.pop("LILYPAD_REPO_DIR", None)
    env["LILYPAD_CALL_ID"] = marker.split("=", 1)[1]
    if env_extra:
        env.update(env_extra)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, start_new_session=True, close_fds=True, **as_agent()
    )
    captures = {proc.stdout.fileno(): StreamCapture(keep_chars), proc.stderr.fileno(): StreamCapture(keep_chars)}
    out_cap, err_cap = captures[proc.stdout.fileno()], captures[proc.stderr.fileno()]
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream.fileno(), selectors.EVENT_READ)
    deadline = started + timeout
    timed_out = False
    open_fds = 2
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(min(remaining, 1.0)):
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if chunk:
                captures[key.fd].feed(chunk)
            else:
                sel.unregister(key.fd)
                open_fds -= 1
    if timed_out:
        kill_call(marker, proc.pid)
    else:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            # The pipes close a moment before the process is reapable, and Popen.wait(timeout)
            # then sleeps 1 ms, 2 ms, ... between polls: that doubled a short Bash call. A pidfd
            # says at once when it has exited; the polling wait stays the fallback and the reaper.
            try:
                pidfd = os.pidfd_open(proc.pid)
            except (AttributeError, OSError):
                pidfd = None
            if pidfd is not None:
                try:
                    with selectors.DefaultSelector() as exited:
                        exited.register(pidfd, selectors.EVENT_READ)
                        exited.select(remaining)
                finally:
                    os.close(pidfd)
                remaining = max(0.0, deadline - time.monotonic())
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_call(marker, proc.pid)
    if timed_out:
        # Collect what is still buffered in the pipes, without waiting on escaped writers.
        for key in list(sel.get_map().values()):
            try:
                while True:
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        break
                    captures[key.fd].feed(chunk)
            except (BlockingIOError, OSError):
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    sel.close()
    out_cap.feed(b"", True)
    err_cap.feed(b"", True)
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, timed_out, out_cap, err_cap, time.monotonic() - started


def tool_bash(args, decided):
    # `decided` is the host's: the seconds to enforce (src/sandbox/bash-timeout.ts applies the
    # reference's timeout rules and Lilypad's cap), or the error the reference raised instead.
    command = args.get("command")
    if command is None or command == "":
        raise ToolInputError("ValueError: command is required")
    command = command if isinstance(command, str) else str(command)
    if isinstance(decided, HostDecidedError):
        raise ToolInputError(str(decided))
    timeout = decided
    rc, timed_out, out_cap, err_cap, _ = run_process(["/bin/bash", "-lc", command], timeout, BASH_LIMIT, REPO)
    if timed_out:
        (out, out_len), (err, err_len) = out_cap.verbatim(), err_cap.verbatim()
        head = "Timed out after %.1fs" % timeout
    else:
        (out, out_len), (err, err_len) = out_cap.text(), err_cap.text()
        head = "Exit code: %d" % rc
    observation = head + "\nSTDOUT:\n" + out + "\nSTDERR:\n" + err
    total = len(head) + len("\nSTDOUT:\n") + out_len + len("\nSTDERR:\n") + err_len
    if total > BASH_LIMIT:
        observation = observation[:BASH_LIMIT] + "\n[truncated %d chars]" % (total - BASH_LIMIT)
    return observation, {"timed_out": timed_out}


# ---------------------------------------------------------------- dispatch

class HostDecidedError(Exception):
    pass


def host_bash_timeout(req):
    """The Bash timeout the host decided for this request; a request without one is refused."""
    error = req.get("timeout_error")
    if isinstance(error, str):
        return HostDecidedError(error)
    seconds = req.get("timeout")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (0 < seconds < float("inf")):
        raise ValueError("a Bash request needs the host's timeout in seconds (a positive finite number), got %r" % (seconds,))
    return float(seconds)


def run_tool(name, raw_arguments, bash_timeout):
    args = parse_arguments(raw_arguments)
    meta = {}
    try:
        if name == "Read":
            text = tool_read(args)
        elif name == "Write":
            text = tool_write(args)
        elif name == "Edit":
            text = tool_edit(args)
        elif name == "Glob":
            text = tool_glob(args)
        elif name == "Bash":
            text, meta = tool_bash(args, bash_timeout)
        else:
            text = "Unknown tool: %s" % name
            meta = {"unknown": True}
    except ToolInputError as e:
        text = str(e)
        meta["error"] = True
    except Exception as e:  # every failure is an ordinary observation, as in the reference
        text = "%s: %s" % (type(e).__name__, e)
        meta["error"] = True
    return text, meta


def op_exec(req):
    """Internal command (tests, patch extraction): not model-facing, binary-safe output."""
    keep = int(req.get("keep_bytes", 65536))
    timeout = float(req.get("timeout", 600))
    cwd = req.get("cwd") or REPO
    env = req.get("env") or None
    rc, timed_out, out_cap, err_cap, elapsed = run_process(req["argv"], timeout, keep, cwd, env)
    return {
        "exit_code": rc,
        "timed_out": timed_out,
        "elapsed": elapsed,
        "stdout": base64.b64encode(bytes(out_cap.raw_head[:keep])).decode(),
        "stdout_bytes": out_cap.total_bytes,
        "stderr_bytes": err_cap.total_bytes,
        "stderr": base64.b64encode(bytes(err_cap.raw_head[:keep])).decode(),
    }


def nondumpable():
    """True when the kernel keeps our /proc entries (fds, memory) from other processes."""
    try:
        import ctypes
        return ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except Exception:
        return False


def become_agent():
    """Acts as the agent with real and saved uid 0 (agent-user.py); remembers why not if it cannot."""
    try:
        uid, gid, groups = agent_ids()
        act_as_agent(uid, gid, groups)
        IDENTITY.update(uid=uid, gid=gid, groups=groups)
    except Exception as e:
        IDENTITY["error"] = "%s: %s" % (type(e).__name__, e)


def hello():
    """What the host checks before it trusts this toolbox: who it acts as, and that it is out of reach."""
    ruid, euid, suid = os.getresuid()
    try:
        capabilities = own_capabilities()
    except (OSError, ValueError):
        capabilities = -1
    return {
        "identity_error": IDENTITY["error"],
        "uid": euid,
        "gid": os.getegid(),
        "groups": sorted(os.getgroups()),
        "real_uid": ruid,
        "saved_uid": suid,
        "capabilities": capabilities,
        "nondumpable": nondumpable(),
        "python": sys.version.split()[0],
        "repo": REPO,
        "pid": os.getpid(),
    }


def handle(req):
    op = req.get("op")
    if IDENTITY["error"] and op != "hello":
        raise RuntimeError("the toolbox does not act as the agent: %s" % IDENTITY["error"])
    if op == "tool":
        started = time.monotonic()
        bash_timeout = host_bash_timeout(req) if req.get("name") == "Bash" else None
        text, meta = run_tool(req.get("name"), req.get("arguments", ""), bash_timeout)
        return {"observation": text, "meta": meta, "elapsed": time.monotonic() - started}
    if op == "exec":
        return op_exec(req)
    if op == "hello":
        return hello()
    if op == "ping":
        return {}
    raise ValueError("unknown op %r" % (op,))


def write_all(fd, data):
    # Under -u, sys.stdout.buffer is a raw file whose write() may take only part of the data and
    # says so in its return value; gVisor (runsc) does that on the exec pipe past 64 KiB, where runc
    # blocks until all is written. Loop, so that a long reply is never cut.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main():
    # Before the first request: from here on no process of the agent's can open /proc/<this pid>/fd/1
    # to write forged replies, or fd/0 to read the host's requests, nor signal or trace this process.
    become_agent()
    out = sys.stdout.fileno()
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        if not line.strip():
            continue
        req_id = None
        try:
            req = json.loads(line)
            req_id = req.get("id")
            resp = handle(req)
            resp["id"] = req_id
            resp["ok"] = True
        except Exception as e:
            resp = {"id": req_id, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        write_all(out, json.dumps(resp, ensure_ascii=True).encode("ascii") + b"\n")


if __name__ == "__main__":
    main()
