"""`atomic_write`: a process killed before the rename (or at any moment of a write loop)
leaves the old file intact and parseable; modes; exclusive creation keeps the first file.
`process_folder`: one private folder a process, removed when it exits."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from wovyr.files import atomic_write, process_folder

# The child stops just before the rename (os.replace) and tells the parent, which kills it.
_STOP_BEFORE_RENAME = """
import os, sys, time
from wovyr.files import atomic_write
real = os.replace
def stop(src, dst):
    sys.stdout.write("before-rename\\n"); sys.stdout.flush()
    time.sleep(60)
    real(src, dst)
os.replace = stop
atomic_write(sys.argv[1], '{"version": 2, "pad": "' + 'y' * 1_000_000 + '"}')
"""

_WRITE_LOOP = """
import json, sys
from wovyr.files import atomic_write
n = 0
sys.stdout.write("started\\n"); sys.stdout.flush()
while True:
    n += 1
    atomic_write(sys.argv[1], json.dumps({"n": n, "pad": "z" * (n % 7 * 50_000)}))
"""


def _child(code: str, target: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_killed_before_the_rename_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write(target, json.dumps({"version": 1}))
    child = _child(_STOP_BEFORE_RENAME, target)
    assert child.stdout is not None
    assert child.stdout.readline() == "before-rename\n"
    # the new content is complete and fsynced in the temporary file, not yet renamed
    strays = list(tmp_path.glob(".state.json.*.tmp"))
    assert len(strays) == 1
    assert strays[0].stat().st_size > 1_000_000
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert json.loads(target.read_text()) == {"version": 1}
    # the next write replaces it whole (the stray temporary file does not get in the way)
    atomic_write(target, json.dumps({"version": 3}))
    assert json.loads(target.read_text()) == {"version": 3}


def test_killed_at_any_moment_of_a_write_loop_leaves_a_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "loop.json"
    atomic_write(target, json.dumps({"n": 0}))
    seen = set()
    for round_ in range(12):
        child = _child(_WRITE_LOOP, target)
        assert child.stdout is not None
        assert child.stdout.readline() == "started\n"
        # a different moment each round: poll until the child has written `round_` files
        before = json.loads(target.read_text())["n"]
        for _ in range(10_000):
            if json.loads(target.read_text())["n"] != before or round_ % 3 == 0:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        document = json.loads(target.read_text())  # never torn
        assert isinstance(document["n"], int)
        assert document.get("pad", "") == "z" * (document["n"] % 7 * 50_000)
        seen.add(document["n"])
    assert len(seen) > 1  # the kills landed at different points


def test_mode_and_exclusive_creation(tmp_path: Path) -> None:
    key = tmp_path / "key"
    assert atomic_write(key, b"first", 0o600, exclusive=True)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not atomic_write(key, b"second", 0o600, exclusive=True)
    assert key.read_bytes() == b"first"
    assert atomic_write(key, b"third", 0o600)
    assert key.read_bytes() == b"third"
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


_PROCESS_FOLDER = """
import os, sys
from wovyr.files import process_folder
folder = process_folder()
assert process_folder() == folder
(folder / "inside").write_text("x")
if os.fork() == 0:  # a forked child has a folder of its own and leaves its parent's alone
    child = process_folder()
    assert child != folder and child.is_dir()
    sys.stdout.write(str(child) + "\\n"); sys.stdout.flush()
    sys.exit(0)
os.wait()
assert (folder / "inside").is_file()
print(folder)
"""


def test_the_process_folder_is_private_and_goes_with_its_process() -> None:
    folder = process_folder()
    assert folder == process_folder() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    out = subprocess.run(
        [sys.executable, "-c", _PROCESS_FOLDER], capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(out) == 2 and out[0] != out[1]
    assert not any(Path(p).exists() for p in out)  # removed by each process at its exit
