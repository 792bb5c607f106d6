"""A hostile agent for a container (issue 44): ``python3 -c SOURCE MODE PORT``, SOURCE this file (the image holds
the harness, not the tests).

It first lists the evidence folder and tries to read the harness's context, then to write ``MARK`` into the evidence
folder outside its own places (the harness's files, the evidence root beside its run) and into the image, and into
its own places (log, trace, state dir, /tmp): one JSON line a try on stdout (a write "done" under a folder that its
private /tmp covers lands there, not on the host: the test reads the host); and says its privileges (user,
capabilities, no-new-privileges, its cgroup's process limit). Then it does the reference agent's work,
and then, by MODE: ``none`` nothing more (the control); ``late`` a worker it double-forks out of its session sends
the create again 0.2 s after the agent exited; ``survivor`` the same 3 s after (past the late window); ``bypass``
one create straight to the destination's PORT, past the fault proxy.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

from harness.agents.reference import Agent
from harness.agents.reference import main as reference_main


def attempt(what, action):
    try:
        action()
        got = "done"
    except OSError as exc:
        got = type(exc).__name__
    print(json.dumps({"try": what, "got": got}), flush=True)


MARK = "-".join(["the", "agent", "was", "here"])  # not in this source, which context.json quotes


def append(path, text=MARK):
    with open(path, "a") as handle:
        handle.write(text)


def write(path):
    with open(path, "w") as handle:
        handle.write(MARK)


def read(path):
    with open(path) as handle:
        handle.read()


def post(url, params):
    request = urllib.request.Request(url, json.dumps(params).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def main(mode, port):
    folder = os.path.dirname(os.environ["HARNESS_AUDIT_LOG"])
    print(json.dumps({"listing": sorted(os.listdir(folder))}), flush=True)
    attempt("read context.json", lambda: read(os.path.join(folder, "context.json")))
    attempt("log", lambda: append(os.environ["HARNESS_AUDIT_LOG"], ""))  # opened for writing: the log stays whole
    attempt("trace", lambda: append(os.environ["HARNESS_TRACE_FILE"], ""))
    attempt("state dir", lambda: write(os.path.join(os.environ["HARNESS_STATE_DIR"], "mine.txt")))
    attempt("tmp", lambda: write("/tmp/mine.txt"))
    attempt("context.json", lambda: append(os.path.join(folder, "context.json")))
    attempt("verdict.json", lambda: write(os.path.join(folder, "verdict.json")))
    attempt("intents.json", lambda: append(os.environ["HARNESS_INTENTS"]))
    attempt("neighbour run", lambda: write(os.path.join(os.path.dirname(folder), "neighbour.txt")))
    attempt("image", lambda: write("/usr/local/mine.txt"))
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
    limits = [p for p in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max") if os.path.exists(p)]
    print(json.dumps({"privileges": {"ids": [os.getuid(), os.getgid()], "CapEff": status.get("CapEff"),
                                     "NoNewPrivs": status.get("NoNewPrivs"),
                                     "pids.max": open(limits[0]).read().strip() if limits else None}}), flush=True)
    code = 0
    try:
        reference_main(Agent)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    intent = json.loads(open(os.environ["HARNESS_INTENTS"]).read())["intents"][0]
    if mode == "bypass":
        status = post(f"http://127.0.0.1:{port}/tickets", intent["params"])
        print(json.dumps({"try": "bypass", "got": status}), flush=True)
    elif mode in ("late", "survivor"):
        # the worker counts from the agent's exit (the end of a pipe only the agent then holds), not from the fork:
        # a loaded machine can take longer than 0.2 s to end the agent's interpreter (as tests/sandbox/late_retry.py)
        exited, held = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.close(held)
                os.read(exited, 1)
                time.sleep(0.2 if mode == "late" else 3)
                post(os.environ["HARNESS_DESTINATION_" + intent["destination"].upper()] + "/tickets",
                     intent["params"])
            os._exit(0)
        os.close(exited)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
