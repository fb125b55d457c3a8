"""Limits: --max-states, --timeout, --max-memory stop cleanly (exit 3, how far it got); huge and deeply nested
inputs get a located error or a result, never a crash; each bug the fuzzer found keeps its regression test here."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, cli
from pipecheck.lang.check import MAX_BLOCKS
from pipecheck.pipeline.configurations import MAX_CONFIGS
from pipecheck.lang.parse import MAX_NESTING, MAX_SPEC_CHARS

RING = str(ROOT / "examples" / "ring.pipe")
LOCATED = "error:"


def _located(err: str, path, line: int | None = None) -> None:
    """The first diagnostic names the file (and the line), and no traceback or internal error is printed."""
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:"), err
    if line is not None:
        assert first.startswith(f"{path}:{line}:"), err
    assert "Traceback" not in err and "internal error" not in err


# ---------------------------------------------------------------- --max-states, --timeout, --max-memory


def test_max_states_reports_states_and_depth():
    code, out, _ = cli("verify", RING, "--max-states", "20")
    assert code == 3
    assert "inconclusive: stopped by max-states after 21 states, depth 19, 1 configuration; no finding so far" in out


def test_max_states_json_says_why_and_how_far():
    code, out, _ = cli("verify", RING, "--max-states", "20", "--format", "json")
    data = json.loads(out)
    assert code == 3 and data["verdict"] == "inconclusive" and data["stopped"] == "max-states"
    assert data["stats"]["states"] == 21 and data["stats"]["depth"] == 19
    assert data["stats"]["limits"]["max_states"] == 20


def test_timeout_stops_with_exit_3():
    # the full interleaving graph of a deep ring is far too big for a tenth of a second
    # (3 s: a shorter timeout may stop the run while the spec is still being checked, and say so)
    code, out, err = cli("verify", RING, "-D", "K_TILES=16", "-D", "STAGES=8", "--no-reduction", "--no-symmetry",
                         "--timeout", "3")
    assert code == 3, err
    assert "inconclusive: stopped by timeout" in out and ", depth " in out


def test_max_memory_stops_with_exit_3():
    # the interpreter alone holds more than 1 MB, so the first check stops the run (in whichever phase it is)
    code, out, _ = cli("verify", RING, "--max-memory", "1")
    assert code == 3
    assert "inconclusive: stopped by max-memory" in out and "no finding so far" in out


def test_a_limit_after_a_finding_keeps_the_finding():
    # --all goes on after the first finding; the limit then stops it, and what was found is reported (exit 1)
    code, out, _ = cli("verify", str(ROOT / "specs" / "cutlass_3722.pipe"), "--all", "--max-states", "100")
    assert code == 1
    assert "stopped by max-states, so the search is incomplete" in out and "[hang]" in out


@pytest.mark.parametrize("args,message", [
    (["--max-states", "0"], "argument --max-states: 0 is not a positive integer"),
    (["--max-states", "-5"], "argument --max-states: -5 is not a positive integer"),
    (["--timeout", "0"], "argument --timeout: 0 is not a positive number of seconds"),
    (["--timeout", "nan"], "argument --timeout: nan is not a positive number of seconds"),
    (["--timeout", "soon"], "argument --timeout: 'soon' is not a number of seconds"),
    (["--max-memory", "0"], "argument --max-memory: 0 is not a positive integer"),
    (["--engine", "bmc", "--depth", "0"], "argument --depth: 0 is not a positive integer"),
])
def test_limit_values_are_checked(args, message):
    code, out, err = cli("verify", RING, *args)
    assert code == 2 and out == ""
    assert err == f"pipecheck: error: {message}\n"


# ---------------------------------------------------------------- huge and deeply nested inputs


def _kernel(body: str, decls: str = "  smem A bytes 64\n") -> str:
    return f"kernel k {{\n{decls}{body}}}\n"


def test_5000_nested_parentheses_get_a_result(spec):
    # parentheses add no level to the syntax tree: this is a plain constant
    p = spec(_kernel("  role r thread { read A tile C }\n", "  smem A bytes 64\n  const C = " + "(" * 5000 + "0"
                     + ")" * 5000 + "\n"))
    code, out, err = cli("verify", str(p))
    assert code == 1 and "[stale-read]" in out, err


@pytest.mark.parametrize("expr", [
    "-" * 5000 + "1",                       # unary minus
    "-(" * 5000 + "1" + ")" * 5000,         # minus around parentheses
    "+".join(["1"] * 5000),                 # a long sum is a deep left-leaning tree
    "min(1, " * 5000 + "1" + ")" * 5000,    # nested calls
])
def test_deeply_nested_expressions_are_a_located_error(spec, expr):
    p = spec(_kernel("  role r thread { }\n", f"  const C = {expr}\n"))
    code, out, err = cli("verify", str(p))
    assert code == 2 and out == ""
    _located(err, p, 2)
    assert f"nest more than {MAX_NESTING} levels deep here" in err and err.rstrip().endswith("") and "[limit]" in err


@pytest.mark.parametrize("block", ["if lane < 5 {", "for i in 0 .. 1 {"])
def test_deeply_nested_blocks_are_a_located_error(spec, block):
    n = 5000
    p = spec(_kernel("  role r warp {\n" + (block + "\n") * n + "read A tile 0\n" + "}\n" * n + "  }\n"))
    code, out, err = cli("verify", str(p))
    assert code == 2 and out == ""
    _located(err, p)
    assert "[limit]" in err


def test_a_long_else_if_chain_is_a_located_error(spec):
    chain = " else ".join(f"if lane == {i} {{ read A tile 0 }}" for i in range(5000))
    p = spec(_kernel(f"  role r warp {{\n    {chain}\n  }}\n"))
    code, _, err = cli("check", str(p))
    assert code == 2
    _located(err, p, 4)
    assert "[limit]" in err


@pytest.mark.parametrize("command", [["verify"], ["verify", "--all-params"], ["verify", "--engine", "bmc", "--depth", "5"],
                                     ["explain"], ["timeline", "--max-states", "300"], ["verify", "--format", "json"]])
def test_nesting_just_under_the_limit_gets_a_result(spec, command):
    # every stage after the parser walks the tree recursively: the limit must leave them room
    depth = MAX_NESTING // 2 - 3  # an if is two levels (the statement and its block)
    ifs = "if lane < 31 {\n" * depth + "read A tile 0\n" + "}\n" * depth
    calls = MAX_NESTING - 8  # below the kernel, the role, its block and the read
    expr = "min(lane, " * calls + "0" + ")" * calls
    for n, body in enumerate((ifs, f"read A tile {expr}\n")):
        p = spec(_kernel("  role r warp {\n" + body + "  }\n"), f"t{n}.pipe")
        assert cli("check", str(p))[0] == 0, "the spec must be just under the limit"
        code, _, err = cli(command[0], str(p), *command[1:])
        assert code in (0, 1, 3), err
        assert "error" not in err


def test_10000_roles_are_a_located_error(spec):
    roles = "".join(f"  role r{i} thread {{ read A tile 0 }}\n" for i in range(10_000))
    p = spec(_kernel(roles))
    code, out, err = cli("check", str(p))
    assert code == 2 and out == ""
    _located(err, p, 1)
    assert "the roles need 10000 threads per CTA; a CTA holds at most 1024 [value]" in err


def test_a_spec_over_the_size_limit_is_a_located_error(spec):
    filler = "# " + "x" * 78 + "\n"
    p = spec(filler * (MAX_SPEC_CHARS // len(filler) + 1) + _kernel("  role r thread { }\n"))
    code, out, err = cli("check", str(p))
    assert code == 2 and out == ""
    _located(err, p)
    assert f"a spec may hold at most {MAX_SPEC_CHARS:,} [limit]" in err


def test_a_large_spec_under_the_limit_gets_a_result(spec):
    body = "".join("    read A tile 0\n" for _ in range(3000))
    p = spec(_kernel("  role r thread {\n    arrive b expect_tx 64\n    tma_load A tile 0 bytes 64 barrier b\n"
                     "    wait b parity 0\n" + body + "  }\n", "  smem A bytes 64\n  mbarrier b count 1\n"))
    code, out, err = cli("verify", str(p))
    assert code == 0 and "verified (3006 states" in out, err


@pytest.mark.slow
def test_a_1mb_spec_gets_a_result(spec):
    body = "".join("    read A tile 0\n" for _ in range(60_000))
    p = spec(_kernel("  role r thread {\n    arrive b expect_tx 64\n    tma_load A tile 0 bytes 64 barrier b\n"
                     "    wait b parity 0\n" + body + "  }\n", "  smem A bytes 64\n  mbarrier b count 1\n"))
    assert p.stat().st_size > 1_000_000
    code, out, err = cli("verify", str(p))
    assert code == 0 and "verified (60006 states" in out, err


def test_kernel_choices_are_counted_before_they_are_listed(spec):
    # `choose w[64]` alone stands for 2^64 configurations: listing them first never finished
    p = spec(_kernel("  role r thread { if w[0] { read A tile 0 } }\n", "  smem A bytes 64\n  choose w[64]\n"))
    code, out, err = cli("check", str(p))
    assert code == 2 and out == ""
    _located(err, p, 3)
    assert f"have about 10^19 combinations; pipecheck explores at most {MAX_CONFIGS} configurations" in err


# ---------------------------------------------------------------- regressions of the fuzz run


def test_shift_operators_parse(spec):
    # `<<` was lexed as two `<` comparisons, so every shift was a syntax error
    p = spec(_kernel("  role r thread { read A tile 0 }\n", "  const C = (1 << 6) >> 1\n  smem A bytes C\n"))
    code, out, err = cli("verify", str(p), "--format", "json")
    assert code == 1, err
    assert json.loads(out)["findings"][0]["code"] == "stale-read"
    p = spec(_kernel("  role r thread { }\n", "  const C = 1 << 2 < 5\n"), "cmp.pipe")
    assert cli("check", str(p))[0] == 0


def test_a_byte_that_is_not_utf8_is_a_located_error(tmp_path):
    p = tmp_path / "t.pipe"
    p.write_bytes(b"kernel k {\n  role r thread { \xe4 }\n}\n")
    code, out, err = cli("check", str(p))
    assert code == 2 and out == ""
    assert err.startswith(f"{p}:2:19: error: byte 0xe4 is not UTF-8 text (spec files are UTF-8) [syntax]"), err


def test_an_index_made_constant_per_thread_is_range_checked(spec):
    # `A[lane]` becomes A[2] for lane 2: it was read as the next array's buffer (or crashed past the last one)
    for extra in ("", "  smem B bytes 64\n"):
        p = spec(_kernel("  role r warp { read A[lane] tile 0 }\n", "  smem A[2] bytes 64\n" + extra))
        code, out, err = cli("verify", str(p))
        assert code == 2 and out == ""
        assert err.startswith(f"{p}:{3 + bool(extra)}:17: error: index 2 of 'A' is out of range 0..1 [value]"), err


def test_a_constant_choice_index_out_of_range_is_located(spec):
    p = spec(_kernel("  role r thread { if w[5] { read A tile 0 } }\n", "  smem A bytes 64\n  choose w[2]\n"))
    code, _, err = cli("verify", str(p))
    assert code == 2
    assert err.startswith(f"{p}:4:"), err
    assert "index 5 of 'w' is out of range 0..1 [value]" in err


def test_a_ring_phase_that_is_not_0_or_1_is_located(spec):
    p = spec(_kernel("  role r warp {\n    ring st(2, phase = lane)\n    read A tile st.index\n  }\n"))
    code, _, err = cli("verify", str(p))
    assert code == 2
    assert err.startswith(f"{p}:5:"), err
    assert "ring st's initial phase must be 0 or 1 for every thread [value]" in err


def test_timeline_of_a_faulting_spec_ends_at_the_fault():
    # a landing due in the same round as the fault was stepped after the kernel had halted (KeyError)
    code, out, err = cli("timeline", str(ROOT / "examples" / "bugs" / "arrive_overflow.pipe"), "--max-states", "2000")
    assert code in (0, 1, 3) and "internal error" not in err, err
    assert "the schedule ends in a fault" in out


def _nested_procs(levels: int, calls: int) -> str:
    procs = []
    for i in range(calls):
        inner = f"p{i + 1}()" if i < calls - 1 else "read A tile 0"
        procs.append(f"proc p{i}() {{\n" + "if lane < 31 {\n" * levels + inner + "\n" + "}\n" * levels + "}\n")
    return "".join(procs) + _kernel("  role r warp { p0() }\n")


def test_blocks_nested_through_procedures_are_a_located_error(spec):
    # each file is under the parser's limit, but 30 calls of 40 nested ifs are 1200 blocks once inlined
    p = spec(_nested_procs(40, 30))
    code, out, err = cli("verify", str(p))
    assert code == 2 and out == ""
    _located(err, p)
    assert f"blocks nest more than {MAX_BLOCKS} deep here once procedure calls are inlined" in err


@pytest.mark.parametrize("command", [["verify"], ["verify", "--all-params"], ["verify", "--engine", "bmc", "--depth", "5"],
                                     ["explain"], ["timeline", "--max-states", "300"]])
def test_blocks_nested_through_procedures_just_under_the_limit_get_a_result(spec, command):
    p = spec(_nested_procs((MAX_BLOCKS - 4) // 2, 2))  # the role body and each procedure body are blocks too
    code, _, err = cli(command[0], str(p), *command[1:])
    assert code in (0, 1, 3), err
    assert "error" not in err


class _SlowLine:
    """A line of states whose every expansion takes 5 ms: a thousand of them take five seconds."""

    def initial(self):
        return 0

    def successors(self, s):
        import time
        time.sleep(0.005)
        return [("next", s + 1, ())]

    def terminal_findings(self, s):
        return ()


def test_timeout_is_checked_by_the_clock_not_every_thousand_states():
    # a role-scope `choose c in 0 .. 4 KiB` gives each state ~30,000 successors; the timeout was only read
    # every 1024 expansions, so `--timeout 3` ran for many minutes (found by the fuzzer)
    from pipecheck.search.explore import Limits, explore
    e = explore(_SlowLine(), Limits(timeout=0.05))
    assert e.stopped == "timeout" and not e.complete
    assert e.states < 200, e.states  # well before the 1024th expansion



def test_a_ring_stage_count_from_a_constant_ternary(spec):
    # check folds `c ? a : b` to a constant, resolution did not: an assertion failed (found by the fuzzer)
    p = spec(_kernel("  role r thread {\n    ring st(4 KiB ? 2 : 3)\n    read A tile st.index\n  }\n"))
    code, out, err = cli("verify", str(p))
    assert code == 1 and "[stale-read]" in out, err


# ---------------------------------------------------------------- limits in every phase (pipeline/limits.py)

def test_a_kernel_that_cannot_launch_is_reported_at_once(spec):
    # a million stages: 16 GB of SMEM. Reported from the parameters alone; nothing is lowered or searched
    import time
    text = (ROOT / "examples" / "ring.pipe").read_text().replace("param STAGES  = 4 in 1..8",
                                                                 "param STAGES = 1000000 in 1..1000000")
    t0 = time.perf_counter()
    code, out, err = cli("verify", str(spec(text)), "--timeout", "20", "--max-memory", "500")
    assert code == 1, err
    assert "[smem-budget]" in out and "(0 states, 0 configurations)" in out
    assert time.perf_counter() - t0 < 15  # generous: it takes about a second


def test_timeout_holds_while_the_spec_is_checked(spec):
    # 200,000 statements take tens of seconds to parse and check; --timeout 1 stops that, exit 3, naming the phase
    import time
    body = "\n".join("    syncwarp" for _ in range(200_000))
    path = spec("kernel big {\n  smem A bytes 1024\n  role p warp {\n" + body + "\n  }\n}\n")
    t0 = time.perf_counter()
    code, out, err = cli("verify", str(path), "--timeout", "1")
    assert time.perf_counter() - t0 < 10, "the timeout was not honoured while checking"
    assert code == 3, err
    assert out.startswith(f"{path}: inconclusive: stopped by timeout in checking (reading and checking the spec) at ")
    assert out.rstrip().endswith("; no finding so far") and "Traceback" not in err


def test_max_memory_holds_while_the_spec_is_checked(spec):
    code, out, err = cli("verify", RING, "--max-memory", "1", "--format", "json")
    assert code == 3, err
    # before the spec is checked there is no kernel to report: the line goes to stderr, stdout stays JSON-free
    if out:
        data = json.loads(out)
        assert data["verdict"] == "inconclusive" and data["stopped"] == "max-memory" and "stopped_in" in data
    else:
        assert "inconclusive: stopped by max-memory in checking" in err


def _slow(seconds: float):
    import time

    def wrap(fn):
        def slow(*args, **kw):
            time.sleep(seconds)  # the watch's timer interrupts the sleep, as it would a long computation
            return fn(*args, **kw)
        return slow
    return wrap


@pytest.mark.parametrize("target,phase", [
    ("resolve_roles", "lowering"),
    ("config_classes", "class building"),
    ("static.tx_accounting", "static checks"),
    ("Model", "model building"),
])
def test_timeout_holds_in_every_phase(monkeypatch, target, phase):
    # each phase made slow in turn (30 s): --timeout 1 stops it there, inconclusive, saying which phase and how far
    import time
    from pipecheck.pipeline import verify as V
    from pipecheck.pipeline.result import Options
    from pipecheck.search.explore import Limits
    owner, _, name = target.rpartition(".")
    obj = getattr(V, owner) if owner else V
    monkeypatch.setattr(obj, name, _slow(60)(getattr(obj, name)))
    t0 = time.perf_counter()
    # 3 s: checking the spec itself (before the slow phase) must fit, even on a loaded machine
    r = V.verify_file(RING, Options(limits=Limits(max_states=10_000, timeout=3.0, stop_at_first=True)))
    assert time.perf_counter() - t0 < 20
    assert r.verdict == "inconclusive" and r.exit_code == 3 and r.stopped == "timeout"
    assert r.stopped_in.startswith(phase), r.stopped_in
    if phase != "lowering":
        assert "(parameter point 1 of 1, 0 configuration(s) explored)" in r.stopped_in
    from pipecheck.report.text import render_result
    assert f"inconclusive: stopped by timeout in {phase}" in render_result(r)


def test_timeout_holds_in_z3(monkeypatch):
    import time
    from pipecheck.symbolic import bmc
    monkeypatch.setattr(bmc, "search", _slow(60)(bmc.search))
    t0 = time.perf_counter()
    code, out, err = cli("verify", RING, "--engine", "bmc", "--depth", "4", "--timeout", "3")
    assert time.perf_counter() - t0 < 20
    assert code == 3 and "stopped by timeout in bmc (parameter point 1 of 1" in out, out + err


def test_a_limit_past_a_finding_keeps_it(monkeypatch, spec):
    # --all-params: the first point shows the hang; later points are slow to build; the limit then stops the run
    # between points and the finding is reported (exit 1), not lost
    from pipecheck.pipeline import verify as V
    slow_after = {"n": 0}
    real = V.config_classes

    def classes(*args, **kw):
        slow_after["n"] += 1
        if slow_after["n"] > 1:
            import time
            time.sleep(1.0)
        return real(*args, **kw)
    monkeypatch.setattr(V, "config_classes", classes)
    path = str(ROOT / "specs" / "cutlass_3722.pipe")
    code, out, err = cli("verify", path, "--all-params", "-D", "STAGES=2..3", "-D", "K_TILES=3..12", "--timeout", "8")
    assert code == 1, out + err
    assert "[hang]" in out and "stopped by timeout" in out


def test_timeout_interrupts_a_long_z3_call():
    # z3 runs in C, where the timer's signal waits; past the limit the watch interrupts z3 (a pigeonhole
    # problem that takes minutes) and the run stops within seconds
    import time
    import z3
    from pipecheck.pipeline import limits
    from pipecheck.search.explore import Limits
    holes = 11
    x = [[z3.Bool(f"p{i}_{j}") for j in range(holes)] for i in range(holes + 1)]
    s = z3.Solver()
    for row in x:
        s.add(z3.Or(row))
    for j in range(holes):
        for a in range(holes + 1):
            for b in range(a + 1, holes + 1):
                s.add(z3.Or(z3.Not(x[a][j]), z3.Not(x[b][j])))
    t0 = time.perf_counter()
    with pytest.raises(limits.LimitReached) as exc:
        with limits.watch(Limits(timeout=1.0)):
            limits.phase("class building", "a z3 query")
            s.check()
    assert time.perf_counter() - t0 < 15
    assert exc.value.limit == "timeout" and exc.value.phase == "class building"
