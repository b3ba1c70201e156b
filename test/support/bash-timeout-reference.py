# The Bash timeout exactly as Lilypad's toolbox decided it before the decision moved to the host
# (src/sandbox/bash-timeout.ts): the Leaf reference's rules in its own language, kept verbatim so
# that test/integration/bash-timeout-reference.test.ts can hold the TypeScript to them.
#
# Reads base64 of a JSON list of [raw_arguments, cap] from argv[1]; prints one JSON result per case.
import base64
import json
import sys

BASH_DEFAULT_TIMEOUT = 120.0
BASH_MIN_TIMEOUT = 0.1


def parse_arguments(raw):
    # Arguments that are not valid JSON, or not a JSON object, are treated as {}.
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except Exception:
        return {}
    return value if isinstance(value, dict) else {}


def bash_timeout(args, cap):
    value = args.get("timeout")
    seconds = BASH_DEFAULT_TIMEOUT
    if value is not None and not isinstance(value, bool):
        try:
            seconds = float(value)
            if seconds > 1000:
                seconds = seconds / 1000.0
        except (TypeError, ValueError):
            seconds = BASH_DEFAULT_TIMEOUT
    ms = args.get("timeout_ms")
    if ms is not None and not isinstance(ms, bool):
        try:
            seconds = float(ms) / 1000.0
        except (TypeError, ValueError):
            pass
    if seconds != seconds:  # NaN
        seconds = BASH_DEFAULT_TIMEOUT
    seconds = max(BASH_MIN_TIMEOUT, seconds)
    capped = cap is not None and seconds > cap
    return (min(seconds, cap) if capped else seconds), capped


def decide(raw, cap):
    # As tool_bash did: the command is checked first, then the timeout (whose errors became the
    # observation "<ClassName>: <message>").
    args = parse_arguments(raw)
    command = args.get("command")
    if command is None or command == "":
        return {"no_command": True}
    try:
        seconds, capped = bash_timeout(args, cap)
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}
    return {"seconds": seconds, "capped": capped}


for raw, cap in json.loads(base64.b64decode(sys.argv[1])):
    print(json.dumps(decide(raw, cap)))
