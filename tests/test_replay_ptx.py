"""Forced-lane replay of real PTX (`pipecheck replay K.ptx --emit-ptx`), the launch capture
(`pipecheck capture -- CMD`, `pipecheck verify DIR/launch-K.json`) and `--elect N`."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import io

from pipecheck.cli import run
from pipecheck.replay.ptx_patch import patch

DATA = Path(__file__).parent / "data"
PTX = DATA / "ptx"


def _run(argv, capsys):
    out, err = io.StringIO(), io.StringIO()
    rc = run(argv, out, err)
    return rc, out.getvalue(), err.getvalue()


def _ops(text: str, op: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if re.match(rf"\s*{re.escape(op)}\b", ln)]


@pytest.mark.parametrize("kernel", ["cutlass_sm90_pingpong", "cute_dsl_tma_pipeline"])
def test_patch_bounds_every_wait_and_forces_every_election(kernel):
    path = PTX / f"{kernel}.ptx"
    text = path.read_text()
    waits = _ops(text, "mbarrier.try_wait") + _ops(text, "mbarrier.test_wait")
    elects = _ops(text, "elect.sync")
    p = patch(text, str(path), elect_lane=3)
    # each wait is kept as it was, once, inside its bounded block; no elect.sync is left
    assert sorted(_ops(p.text, "mbarrier.try_wait") + _ops(p.text, "mbarrier.test_wait")) == sorted(waits)
    assert _ops(p.text, "elect.sync") == []
    assert [s.kind for s in p.sites].count("wait") == len(waits) and len(waits) > 0
    assert [s.kind for s in p.sites].count("elect") == len(elects)
    # every site names its PTX line and the instruction there
    lines = text.splitlines()
    for s in p.sites:
        assert lines[s.ptx_line - 1].strip() == s.instruction
    assert p.text.count("exit;") >= len(waits)  # each bounded wait gives up rather than spin forever
    assert "shr.b32 %pced, %pcem, 3;" in p.text


def test_patch_without_a_lane_keeps_the_hardware_election():
    path = PTX / "cutlass_sm90_pingpong.ptx"
    text = path.read_text()
    p = patch(text, str(path), elect_lane=None)
    assert _ops(p.text, "elect.sync") == _ops(text, "elect.sync")
    assert {s.kind for s in p.sites} == {"wait"}


def test_patch_is_deterministic_and_names_cuda_lines():
    path = PTX / "cutlass_sm90_pingpong.ptx"
    a = patch(path.read_text(), str(path), elect_lane=3)
    b = patch(path.read_text(), str(path), elect_lane=3)
    assert a.text == b.text and a.table() == b.table()
    waits = [s for s in a.sites if s.kind == "wait"]
    assert any(s.source == "barrier.h:424" for s in waits)  # ClusterBarrier::wait's try_wait loop
    assert all(s.parity for s in waits)  # CUTLASS waits by parity


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit)")
def test_patched_ptx_assembles(tmp_path, capsys):
    out = tmp_path / "k.ptx"
    rc, _, err = _run(["replay", str(PTX / "cutlass_sm90_pingpong.ptx"), "--emit-ptx", str(out), "--elect-lane", "3"],
                      capsys)
    assert rc == 0 and "34 mbarrier waits" in err and "11 elect.sync electing lane 3" in err
    table = json.loads((tmp_path / "k.ptx.sites.json").read_text())
    assert table["elect_lane"] == 3 and len(table["sites"]) == 45
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(out), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_replay_ptx_bad_input(tmp_path, capsys):
    rc, _, err = _run(["replay", str(PTX / "mini_ok.ptx"), "--emit-ptx", str(tmp_path / "o.ptx"), "--elect-lane", "40"],
                      capsys)
    assert rc == 2 and "a lane is 0..31" in err
    rc, _, err = _run(["replay", str(DATA.parent.parent / "examples/ring.pipe"), "--emit-ptx", str(tmp_path / "o.ptx")],
                      capsys)
    assert rc == 2 and "compiled kernel" in err
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.8\n.target sm_90a\n.address_size 64\n.visible .entry k(\n{\n  frob %r1;\n}\n")
    rc, _, err = _run(["replay", str(bad), "--emit-ptx", str(tmp_path / "o.ptx")], capsys)
    assert rc == 2 and "bad.ptx:" in err and "Traceback" not in err


def test_elect_lane_forces_the_election(capsys):
    spec = str(DATA.parent.parent / "specs/cutlass_3722.pipe")
    rc0, out0, _ = _run(["verify", spec, "--elect", "0", "--max-states", "20000"], capsys)
    rc3, out3, _ = _run(["verify", spec, "--elect", "3", "--max-states", "20000"], capsys)
    assert rc0 == 0 and "verified" in out0
    assert rc3 == 1 and "hang" in out3
    rc, _, err = _run(["verify", spec, "--elect", "32"], capsys)
    assert rc == 2 and "lane 0..31" in err


def test_elect_lane_on_ptx(capsys):
    k = str(PTX / "mini_bug_count.ptx")
    rc, out, _ = _run(["verify", k, "--elect", "0", "--format", "json", "--max-states", "20000"], capsys)
    assert json.loads(out)["semantics"]["elect"] == "0"


def _cc() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def _cuda_h() -> bool:
    from pipecheck.replay.capture import _cuda_include
    return _cuda_include() is not None


@pytest.mark.skipif(_cc() is None or not _cuda_h(), reason="needs a C compiler and cuda.h")
def test_capture_records_a_launch_that_verify_checks(tmp_path, capsys):
    """A program that loads a PTX module and launches it through the driver API, run under the
    interposer against a stand-in driver: the record holds the module, the shape and the parameter
    bytes, and `verify` checks the kernel at the value the program passed."""
    from pipecheck.replay.capture import _cuda_include
    cc = _cc()
    drv = tmp_path / "drv"
    drv.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(drv / "libcuda.so.1"),
                    str(DATA / "capture/fake_driver.c")], check=True)
    (drv / "libcuda.so").symlink_to("libcuda.so.1")
    exe = tmp_path / "launcher"
    subprocess.run([cc, f"-I{_cuda_include()}", str(DATA / "capture/launcher.c"), "-o", str(exe), f"-L{drv}", "-lcuda"],
                   check=True)
    rec = tmp_path / "rec"
    import os
    old = os.environ.get("LD_LIBRARY_PATH")
    os.environ["LD_LIBRARY_PATH"] = str(drv)
    try:
        rc, out, err = _run(["capture", "--dir", str(rec), "--", str(exe), str(PTX / "mini_ok.ptx"), "3"], capsys)
    finally:
        if old is None:
            del os.environ["LD_LIBRARY_PATH"]
        else:
            os.environ["LD_LIBRARY_PATH"] = old
    assert rc == 0, err
    assert "1 launch(es) recorded" in out
    launch = json.loads((rec / "launch-0.json").read_text())
    assert launch["kernel"] == "_Z4miniiPi" and launch["block"] == [64, 1, 1] and launch["param_layout"] == [[0, 4], [8, 8]]
    assert (rec / "module-0.ptx").read_text() == (PTX / "mini_ok.ptx").read_text()
    assert (rec / "launch-0.params").read_bytes()[:4] == (3).to_bytes(4, "little")
    rc, out, _ = _run(["verify", str(rec / "launch-0.json"), "--format", "json", "--max-states", "20000"], capsys)
    res = json.loads(out)
    assert rc == 0 and res["verdict"] == "verified"
    p0 = next(p for p in res["ptx"]["parameters"] if p["name"] == "param_0")
    assert p0["value"] == 3 and p0["point"] == "launch" and res["ptx"]["launch"].endswith("launch-0.json")
    # the text names the loop bound it read from the launch; the pointer's bytes, which no barrier, buffer or
    # loop of the protocol reads, are one line at the end and not in the first
    rc, out, _ = _run(["verify", str(rec / "launch-0.json"), "--max-states", "20000"], capsys)
    head = out.splitlines()[0]
    assert rc == 0 and "(param_0=3)" in head and "param_8" not in head, head
    assert "  from the captured launch too, read by no barrier, buffer or loop of the protocol: param_8=" in out


def test_verify_refuses_a_launch_without_ptx(tmp_path, capsys):
    (tmp_path / "module-0.cubin").write_bytes(b"\x7fELF")
    (tmp_path / "launch-0.params").write_bytes(b"\0" * 8)
    (tmp_path / "launch-0.json").write_text(json.dumps({
        "schema": "pipecheck-launch/1", "index": 0, "kernel": "k", "image": "module-0.cubin", "grid": [1, 1, 1],
        "block": [32, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0, "params": "launch-0.params",
        "param_layout": [[0, 8]]}))
    rc, _, err = _run(["verify", str(tmp_path / "launch-0.json")], capsys)
    assert rc == 2 and "machine code without PTX" in err and "Traceback" not in err
