#!/usr/bin/env python3
"""Count what is in the PTX corpus; prints the Markdown tables that NOTES.md quotes.

Usage: python tests/data/ptx/census.py [FILE.ptx ...]   (default: every *.ptx here)
       python tests/data/ptx/census.py --opcodes          (also: every full opcode)

Stdlib only.  The parser is deliberately crude (it is a census, not the front end):
code is what lies inside an `.entry`/`.func` body, outside the `.section .debug_*`
blocks; a statement is a `;`-terminated piece of a line with `//` comments, leading
labels (`L:`) and a guard (`@%p`, `@!%p`, `@P1`) removed; inline-asm scopes `{ ... }`
count like any other code; `.reg`/`.loc`/`.pragma` and other directives are not
instructions.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LABEL_RE = re.compile(r"^\s*[$%\w]+:(?!:)\s*")
GUARD_RE = re.compile(r"^@!?%?[\w$]+\s+")

# (family, predicate on the full opcode)
FAMILIES = [
    ("mbarrier.init", lambda o: o.startswith("mbarrier.init")),
    ("mbarrier.arrive (plain)", lambda o: o.startswith("mbarrier.arrive")
        and "expect_tx" not in o and not o.startswith("mbarrier.arrive_drop")),
    ("mbarrier.arrive.expect_tx", lambda o: o.startswith("mbarrier.arrive.expect_tx")),
    ("mbarrier.expect_tx", lambda o: o.startswith("mbarrier.expect_tx")),
    ("mbarrier.try_wait", lambda o: o.startswith("mbarrier.try_wait")),
    ("mbarrier.test_wait", lambda o: o.startswith("mbarrier.test_wait")),
    ("elect.sync", lambda o: o.startswith("elect.sync")),
    ("cp.async.bulk.tensor (global->shared)", lambda o: o.startswith("cp.async.bulk.tensor")
        and ".shared::" in o.split("cp.async.bulk.tensor", 1)[1].split(".global")[0]),
    ("cp.async.bulk.tensor (shared->global)", lambda o: o.startswith("cp.async.bulk.tensor")
        and re.search(r"\.global\.shared::", o) is not None),
    ("cp.async.bulk (non-tensor)", lambda o: o.startswith("cp.async.bulk.")
        and not o.startswith(("cp.async.bulk.tensor", "cp.async.bulk.commit_group",
                              "cp.async.bulk.wait_group", "cp.async.bulk.prefetch"))),
    ("cp.async.bulk.commit_group", lambda o: o.startswith("cp.async.bulk.commit_group")),
    ("cp.async.bulk.wait_group", lambda o: o.startswith("cp.async.bulk.wait_group")),
    ("cp.reduce.async.bulk", lambda o: o.startswith("cp.reduce.async.bulk")),
    ("wgmma.fence", lambda o: o.startswith("wgmma.fence")),
    ("wgmma.mma_async", lambda o: o.startswith("wgmma.mma_async")),
    ("wgmma.commit_group", lambda o: o.startswith("wgmma.commit_group")),
    ("wgmma.wait_group", lambda o: o.startswith("wgmma.wait_group")),
    ("bar.sync", lambda o: o.startswith("bar.sync")),
    ("bar.arrive", lambda o: o.startswith("bar.arrive")),
    ("barrier.sync", lambda o: o.startswith("barrier.sync")),
    ("barrier.arrive", lambda o: o.startswith("barrier.arrive")),
    ("bar.warp.sync", lambda o: o.startswith("bar.warp.sync")),
    ("barrier.cluster", lambda o: o.startswith("barrier.cluster")),
    ("fence.proxy.async", lambda o: o.startswith("fence.proxy.async")),
    ("fence.mbarrier_init", lambda o: o.startswith("fence.mbarrier_init")),
    ("fence (other)", lambda o: o.startswith("fence.") and not o.startswith(
        ("fence.proxy.async", "fence.mbarrier_init"))),
    ("membar", lambda o: o.startswith("membar")),
    ("setmaxnreg", lambda o: o.startswith("setmaxnreg")),
    ("mapa", lambda o: o.startswith("mapa")),
    ("atom", lambda o: o.startswith("atom.")),
    ("red", lambda o: o.startswith("red.")),
    ("ld.global", lambda o: o.startswith("ld.global")),
    ("st.global", lambda o: o.startswith("st.global")),
    ("ld.param", lambda o: o.startswith("ld.param")),
    ("ld.shared", lambda o: o.startswith("ld.shared")),
    ("st.shared", lambda o: o.startswith("st.shared")),
    ("stmatrix", lambda o: o.startswith("stmatrix")),
    ("shfl.sync", lambda o: o.startswith("shfl.sync")),
    ("prefetch.tensormap", lambda o: o.startswith("prefetch") and "tensormap" in o),
    ("griddepcontrol", lambda o: o.startswith("griddepcontrol")),
    ("call", lambda o: o.startswith("call")),
    ("ret", lambda o: o == "ret" or o.startswith("ret.")),
    ("exit", lambda o: o == "exit"),
    ("brkpt", lambda o: o == "brkpt"),
    ("trap", lambda o: o == "trap"),
]


def parse(path):
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    info = {
        "name": os.path.basename(path)[:-4],
        "lines": text.count("\n") + (0 if text.endswith("\n") else 1),
        "loc": 0, "file": 0, "func_directives": 0, "entries": [],
        "ops": collections.Counter(), "version": None, "target": None,
        "header": [l for l in lines[:8] if l.startswith("//")],
        "debug_sections": [],
    }
    depth = 0          # brace depth inside a function body (inline-asm scopes nest)
    in_body = False
    in_section = False
    cur = None
    pending = None     # entry being declared (between `.entry` and `{`)
    buf = ""           # statement text collected so far
    for raw in lines:
        line = raw.split("//", 1)[0].rstrip()
        s = line.strip()
        if not s:
            continue
        if in_section:
            if s == "}":
                in_section = False
            continue
        if s.startswith(".section"):
            info["debug_sections"].append(s.split()[1])
            in_section = "{" not in s or not s.endswith("}")
            continue
        if not in_body:
            if s.startswith(".version"):
                info["version"] = s.split()[1]
            elif s.startswith(".target"):
                info["target"] = s.split(None, 1)[1]
            elif s.startswith(".file"):
                info["file"] += 1
            m = re.match(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(entry|func)\b\s*(.*)$", s)
            if m:
                if m.group(1) == "func":
                    info["func_directives"] += 1
                name = re.match(r"^(?:\([^)]*\)\s*)?([\w$]+)", m.group(2))
                pending = {"kind": m.group(1), "name": name.group(1) if name else "?",
                           "params": [], "directives": []}
                if s.endswith(";"):      # a prototype / declaration only
                    info["entries"].append(pending) if pending["kind"] == "entry" else None
                    pending = None
                continue
            if pending is not None:
                pm = re.match(r"^\.param\s+(.*?)\s*,?$", s)
                if pm:
                    pending["params"].append(pm.group(1).rstrip(","))
                    continue
                dm = re.match(r"^\.(reqntid|maxntid|minnctapersm|reqnctapercluster|"
                              r"explicitcluster|maxnreg|maxclusterrank|pragma)\b(.*)$", s)
                if dm:
                    pending["directives"].append("." + dm.group(1) + dm.group(2).rstrip(";"))
                    continue
                if s == "{":
                    in_body, depth, cur = True, 1, pending
                    if cur["kind"] == "entry":
                        info["entries"].append(cur)
                    pending = None
                continue
            continue
        # inside a body: scope braces stand alone on their lines (operand braces such as
        # `{%r1, %r2}` or the wgmma accumulator list never start a line alone)
        if s == "{":
            depth += 1
            continue
        if s == "}":
            depth -= 1
            if depth == 0:
                in_body, cur, buf = False, None, ""
            continue
        if s.startswith(".loc"):
            info["loc"] += 1
            continue
        if not buf:
            while True:
                m = LABEL_RE.match(s)
                if not m:
                    break
                s = s[m.end():].strip()
            if not s:
                continue
        buf = (buf + " " + s).strip()
        if not buf.endswith(";"):
            continue       # a statement continued on the next line
        for piece in buf.split(";"):
            p = piece.strip()
            if p and not p.startswith("."):
                p = GUARD_RE.sub("", p)
                if p.split():
                    info["ops"][p.split()[0]] += 1
        buf = ""
    return info


def families(ops):
    out = collections.OrderedDict()
    for fam, pred in FAMILIES:
        out[fam] = sum(n for op, n in ops.items() if pred(op))
    return out


def main(argv):
    show_ops = "--opcodes" in argv
    files = [a for a in argv if not a.startswith("--")] or sorted(glob.glob(os.path.join(HERE, "*.ptx")))
    infos = [parse(f) for f in files]
    short = {i["name"]: re.sub(r"^cutlass_sm90_|^cute_dsl_tma_pipeline", lambda m: "dsl" if m.group(0).startswith("cute") else "", i["name"]) or "dsl" for i in infos}

    print("## Size\n")
    print("| file | lines | .loc | .file | .entry | .func | .version | debug sections |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for i in infos:
        print(f"| {i['name']} | {i['lines']} | {i['loc']} | {i['file']} | {len(i['entries'])} "
              f"| {i['func_directives']} | {i['version']} | {' '.join(i['debug_sections']) or '-'} |")

    print("\n## Instruction families (code only)\n")
    cols = [short[i["name"]] for i in infos]
    print("| family | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    fams = [families(i["ops"]) for i in infos]
    for fam, _ in FAMILIES:
        print(f"| {fam} | " + " | ".join(str(f[fam]) for f in fams) + " |")
    print("| (all instructions) | " + " | ".join(str(sum(i["ops"].values())) for i in infos) + " |")

    print("\n## Opcodes (first dotted token), summed over the corpus\n")
    first = collections.Counter()
    for i in infos:
        for op, n in i["ops"].items():
            first[op.split(".")[0]] += n
    print("| opcode | count | opcode | count | opcode | count | opcode | count |")
    print("|---|---:|---|---:|---|---:|---|---:|")
    items = sorted(first.items(), key=lambda kv: (-kv[1], kv[0]))
    for r in range(0, len(items), 4):
        row = items[r:r + 4] + [("", "")] * (4 - len(items[r:r + 4]))
        print("| " + " | ".join(f"`{o}` | {n}" if o else " | " for o, n in row) + " |")

    print("\n## Entries: launch directives and .param\n")
    for i in infos:
        for e in i["entries"]:
            print(f"- {i['name']}: `{' '.join(e['directives']) or '(none)'}`; "
                  f"params: " + "; ".join(f"`{re.sub(r'[A-Za-z0-9_$]{40,}', '<name>', p)}`" for p in e["params"]))

    if show_ops:
        print("\n## Full opcodes per file\n")
        for i in infos:
            print(f"### {i['name']}\n")
            for op, n in sorted(i["ops"].items()):
                print(f"    {n:6d}  {op}")
            print()


if __name__ == "__main__":
    main(sys.argv[1:])
