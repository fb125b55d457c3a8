"""--stats: where a state space comes from (search/census.py), without changing the report or the search."""
from __future__ import annotations

import re

from conftest import ROOT, cli

from pipecheck.pipeline.result import Options
from pipecheck.pipeline.verify import verify_file
from pipecheck.search.census import census

PINGPONG = str(ROOT / "benchmarks" / "specs" / "pingpong_fixed.pipe")
SMALL = ("-D", "STAGES=2", "-D", "K_TILES=2", "-D", "TILES=2")


def test_stats_prints_the_census_and_leaves_the_report_alone():
    code, out, err = cli("verify", PINGPONG, *SMALL, "--stats")
    code0, out0, _ = cli("verify", PINGPONG, *SMALL)
    assert code == code0 == 0 and out == out0  # the report is byte-identical with and without --stats
    assert "where the 133 states come from" in err
    assert "role instance: distinct places of its classes together" in err and "math[0]:" in err
    assert "    producer lane 0: " in err
    assert "partial-order reduction: a smaller set in" in err
    assert "private runs: " in err  # steps taken inside a thread group's move (search/chains.py)



def test_stats_line_of_a_run_with_findings_counts_the_states_past_the_first():
    # the states reported are those to the first finding; the seconds are of the whole search, which went on past it
    # for the cause (--cause-budget): the line says both, and its rate is of every state explored
    spec = str(ROOT / "benchmarks" / "specs" / "pingpong_bug_no_store_drain.pipe")
    small = ("-D", "STAGES=4", "-D", "K_TILES=3", "-D", "TILES=4", "--jobs", "1")
    _, _, err = cli("verify", spec, *small, "--stats", "--cause-budget", "50")
    line = next(x for x in err.splitlines() if "states/s" in x)
    m = re.search(r": (\d+) states, .* to the first finding; (\d+) states past it; ([\d.]+) s \(([\d,]+) states/s\)$",
                  line)
    assert m is not None and int(m[2]) >= 50, line
    rate, every = int(m[4].replace(",", "")), (int(m[1]) + int(m[2])) / float(m[3])  # (seconds shown rounded)
    assert abs(rate - every) <= 0.02 * every
    # without a cause budget the search stops at the first finding: nothing past it to tell
    _, _, err = cli("verify", spec, *small, "--stats", "--cause-budget", "0")
    line = next(x for x in err.splitlines() if "states/s" in x)
    assert "first finding" not in line and " states, " in line

def test_census_counts_every_visited_state_once():
    overrides = (("STAGES", 2), ("K_TILES", 2), ("TILES", 2))
    result = verify_file(PINGPONG, Options(overrides=overrides, stats=True))
    (run,) = result.runs
    data = census(run.model, run.exploration)
    assert data["states"] == run.exploration.states == 133
    assert {r["unit"] for r in data["roles"]} == {"producer", "math[0]", "math[1]"}
    for c in data["classes"]:
        assert 1 <= c["statements"] <= c["places"] and c["split_states"] <= data["states"]
    red = data["reduction"]
    assert red["reduced_states"] + red["unreduced_states"] <= data["states"]
    assert sum(s["states"] for s in red["sets"]) == red["reduced_states"]
    # without --stats the visited keys are not kept, and the search is the same
    plain = verify_file(PINGPONG, Options(overrides=overrides))
    assert census(plain.runs[0].model, plain.runs[0].exploration) is None
    assert plain.runs[0].exploration.states == run.exploration.states


SPLIT = """
kernel split {
  arch sm_90
  role a warp {
    bar_sync 1, 64
    bar_sync 2, 64
  }
  role b warpgroup {
    bar_sync 1, 64
    bar_sync 2, 64
  }
}
"""


def test_a_class_that_splits_says_where(tmp_path):
    # a counted class splits where a collective releases only part of it: the census names the places
    spec = tmp_path / "split.pipe"
    spec.write_text(SPLIT)
    _, _, err = cli("verify", str(spec), "--stats")
    assert "b (all 128 threads): 7 (5), split in 6 states (up to 2 groups)" in err
    assert "4 states with its threads at: line 9 `bar_sync 1, 64`; line 10 `bar_sync 2, 64`" in err
    assert "a (all 32 lanes): 5 (5)\n" in err


def test_pipe_runs_do_not_import_the_ptx_front_end():
    # start-up: the PTX front end is imported only for a compiled kernel (pipeline/verify.py)
    import subprocess
    import sys
    code = ("import sys, io; from pipecheck import cli; "
            f"cli.run(['verify', {str(ROOT / 'examples' / 'ring.pipe')!r}], io.StringIO(), io.StringIO()); "
            "print('pipecheck.pipeline.ptx' in sys.modules, 'pipecheck.ptx.frontend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"], out
    from pipecheck.pipeline import ptx, verify
    assert verify.PTX_SUFFIXES == ptx.PTX_SUFFIXES
