"""Determinism: the same spec gives the same bytes in every report format, run after run and whatever
PYTHONHASHSEED is (set and dict order must never leak into the output)."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

SPECS = ["specs/cutlass_3722.pipe", "examples/bugs/store_reuse.pipe", "examples/bugs/double_arrive.pipe"]
COMMANDS = [["verify", "--format", "text"], ["verify", "--format", "json"], ["verify", "--format", "sarif"], ["explain"]]
# one interpreter per hash seed runs every spec and command in-process and prints all of it
SCRIPT = """
import io, sys
from pipecheck.cli import run
for spec in sys.argv[1:]:
    for cmd in %r:
        out, err = io.StringIO(), io.StringIO()
        code = run([cmd[0], spec, *cmd[1:]], out, err)
        sys.stdout.write(f"=== {spec} {' '.join(cmd)} -> {code}\\n{out.getvalue()}--- stderr\\n{err.getvalue()}")
""" % (COMMANDS,)


def _outputs(seed: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, *SPECS], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_reports_are_byte_identical_across_hash_seeds():
    procs = {seed: _outputs(seed) for seed in ("0", "1", "31337")}
    outs = {}
    for seed, p in procs.items():
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
        outs[seed] = out
    first = outs["0"]
    assert first.count(b"=== ") == len(SPECS) * len(COMMANDS)
    assert b"cutlass_3722.pipe verify --format text -> 1" in first  # the flagship finding is in there
    for seed, out in outs.items():
        if out != first:
            a, b = first.decode().splitlines(), out.decode().splitlines()
            diff = next(i for i, (x, y) in enumerate(zip(a, b + [""] * len(a))) if x != y)
            raise AssertionError(f"PYTHONHASHSEED={seed} differs from 0 at line {diff + 1}:\n{a[diff]!r}\n{b[diff]!r}")


def test_json_and_sarif_carry_no_timings():
    # the JSON schema's stats are counts and limits only; a run's seconds go to stderr with --stats
    import json

    from conftest import cli
    _, out, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--format", "json")
    stats = json.loads(out)["stats"]
    assert set(stats) == {"configurations", "states", "transitions", "depth", "limits"}
    _, sarif, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--format", "sarif")
    for word in ("seconds", "startTimeUtc", "endTimeUtc", "duration"):
        assert word not in sarif
