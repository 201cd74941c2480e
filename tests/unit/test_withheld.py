"""Secret variables leave a process's environment (`wovyr.withheld`), in real processes: a
process started with one executes itself again without it (same pid), reads it back into
memory, and shows it nowhere in `/proc/self/environ` or `os.environ`; a child it hands the
values to gets them the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from wovyr.withheld import FD_VARIABLE

ROOT_KEY = "5a" * 32
_PROBE = """\
import json, os, subprocess, sys
from wovyr import withheld
withheld.withhold()
def report():
    raw = open("/proc/self/environ", "rb").read().decode(errors="replace")
    started = dict(x.split("=", 1) for x in raw.split("\\0") if "=" in x)
    fd = started.get("WOVYR_WITHHELD_FD")
    try:
        fd is None or os.fstat(int(fd))
        closed = fd is None
    except OSError:
        closed = True
    return {
        "pid": os.getpid(),
        "proc_environ": raw,
        "os_environ": dict(os.environ),
        "pipe": fd,
        "pipe_closed": closed,
        "seen": {k: withheld.environ().get(k) for k in ("WOVYR_KMS_ROOT_KEY", "EXTRA", "PLAIN")},
        "held": sorted(withheld.held()),
    }
if sys.argv[1] == "parent":
    with withheld.handing_over({"EXTRA": "handed"}) as (env, fd):
        child = subprocess.run(
            [sys.executable, "-c", sys.argv[2], "child"],
            env=env, pass_fds=(fd,), capture_output=True, text=True, check=True,
        )
    print(json.dumps({"self": report(), "child": json.loads(child.stdout)}))
else:
    print(json.dumps(report()))
"""


def test_a_secret_variable_is_read_into_memory_and_left_out_of_the_environment() -> None:
    env = {
        **os.environ,
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PLAIN": "stays",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", _PROBE, "parent", _PROBE],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    found = json.loads(out)
    me, child = found["self"], found["child"]

    assert me["pid"] == process.pid  # executed again in place, not a new process
    assert ROOT_KEY not in me["proc_environ"] and "WOVYR_KMS_ROOT_KEY" not in me["os_environ"]
    # the pipe's number is in the block the image was started with; the pipe is closed
    assert me["pipe"] is not None and me["pipe_closed"]
    assert FD_VARIABLE not in me["os_environ"]
    assert me["seen"] == {"WOVYR_KMS_ROOT_KEY": ROOT_KEY, "EXTRA": None, "PLAIN": "stays"}
    assert me["held"] == ["WOVYR_KMS_ROOT_KEY"]
    # the child was handed the secret and the extra value through the pipe, not its env
    assert ROOT_KEY not in child["proc_environ"] and "handed" not in child["proc_environ"]
    assert child["seen"] == {"WOVYR_KMS_ROOT_KEY": ROOT_KEY, "EXTRA": "handed", "PLAIN": "stays"}
    assert child["held"] == ["EXTRA", "WOVYR_KMS_ROOT_KEY"]
    assert child["pipe"] is not None and child["pipe_closed"]
    assert err == ""


def test_a_process_without_secret_variables_runs_as_it_was_started() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("WOVYR_KMS_ROOT_KEY", FD_VARIABLE)}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    code = (
        "import os; from wovyr import withheld; withheld.withhold();"
        "print(os.getpid(), sorted(withheld.held()))"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )

    assert done.stdout.split(" ", 1)[1] == "[]\n"
