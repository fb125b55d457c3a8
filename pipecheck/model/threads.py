"""Thread classes: threads of one role instance that run the same program and move as one counted
block, with the configuration they were specialised for (which lane each `elect` picks, kernel
choices). This is what every front end lowers to and what the model executes.
"""
from __future__ import annotations

from dataclasses import replace

from ..core.records import record
from ..core.words import ranges
from .ir import Program
from .kernel import KernelShape

FULL_MASK = 0xFFFFFFFF


@record
class Config:
    """Everything fixed for one exploration besides parameters: elected lanes, kernel choices."""

    elect: tuple[tuple[int, int], ...] = ()  # (mask, elected lane)
    choices: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def elected(self, mask: int, lowest: bool) -> int:
        for m, lane in self.elect:
            if m == mask:
                return lane
        return lowest_lane(mask)

    def choice(self, name: str) -> tuple[int, ...]:
        for n, vals in self.choices:
            if n == name:
                return vals
        raise KeyError(name)


def lowest_lane(mask: int) -> int:
    for lane in range(32):
        if mask >> lane & 1:
            return lane
    return 0


@record
class ThreadClass:
    id: int
    cta: int
    role: int
    role_name: str
    instance: int
    members: tuple[int, ...]  # thread indices within the role instance
    warp: int | None  # set when every member is in one warp
    warpgroup: int | None
    program: Program
    signalling: bool
    label: str
    role_threads: int
    instances: int
    unit: str = ""  # the role instance, e.g. "consumer[1]"
    who: str = ""  # which of its threads, e.g. "thread 0", "lanes 1-31", "" for all


    @property
    def size(self) -> int:
        return len(self.members)

    def shape_key(self) -> tuple:
        """Everything exploration depends on, but not which threads are members."""
        return (self.cta, self.role, self.instance, self.size, self.warp, self.warpgroup, self.program)



def class_label(role: str, instances: int, threads: int, clustered: bool, instance: int, cta: int,
                members: tuple[int, ...]) -> tuple[str, str, str]:
    """(full label, role instance, which threads) for reports: `consumer[1] threads 1-127`."""
    name = role + (f"[{instance}]" if instances > 1 else "")
    if clustered:
        name = f"cta{cta}.{name}"
    if threads == 1:
        return name, name, ""
    unit = "lane" if threads <= 32 else "thread"
    if len(members) == threads:
        return f"{name} (all {threads} {unit}s)", name, f"all {threads} {unit}s"
    who = f"{unit}{'s' if len(members) > 1 else ''} {ranges(members)}"
    return f"{name} {who}", name, who


def split_classes(kernel: KernelShape, classes: list[ThreadClass], by: str) -> list[ThreadClass]:
    """Without the counter abstraction: each warp (`by="warps"`) or each thread (`by="threads"`) of a
    class is its own class, so it moves by itself.

    The counted classes are exact for what they merge (DESIGN.md, "Threads"); this exists to
    measure what they save (`--counter`) and to test that they change no verdict.
    """
    out: list[ThreadClass] = []
    for cl in classes:
        parts: dict[int, list[int]] = {}
        for t in cl.members:
            parts.setdefault(t if by == "threads" else t // 32, []).append(t)
        if len(parts) == 1:
            out.append(replace(cl, id=len(out)))
            continue
        for mem in parts.values():
            label, unit, who = class_label(cl.role_name, cl.instances, cl.role_threads, kernel.cluster_size > 1, cl.instance,
                                           cl.cta, tuple(mem))
            out.append(replace(cl, id=len(out), members=tuple(mem), warp=mem[0] // 32,
                               warpgroup=mem[0] // 128, label=label, unit=unit, who=who))
    return out


def who_threads(cl: ThreadClass, members: set[int] | frozenset[int]) -> str:
    """Some threads of a role instance in the fewest words: `warps 1-3` when they are whole warps of a role
    larger than a warp, else `threads 1-127` / `lanes 1-31`; "" for all of them."""
    if len(members) == cl.role_threads:
        return ""
    warps = {t // 32 for t in members}
    if cl.role_threads > 32 and all(t in members for w in warps for t in range(32 * w, min(32 * w + 32, cl.role_threads))):
        return f"warp{'s' if len(warps) > 1 else ''} {ranges(warps)}"
    unit = "lane" if cl.role_threads <= 32 else "thread"
    return f"{unit}{'s' if len(members) > 1 else ''} {ranges(members)}"


def compact_names(parts: list[tuple[ThreadClass, frozenset[int], bool]]) -> list[str]:
    """Names for groups of threads, instances merged: (a class of the instance, its threads, whether they are
    all its unfinished threads) -> `consumer[0..1] warps 1-3`, `consumer[0..1]`, `producer lane 1`."""
    keyed: dict[tuple, list[int]] = {}
    for cl, members, whole in parts:
        who = who_threads(cl, members)
        if whole and not who.startswith("warp"):  # all its unfinished threads, not whole warps of a larger role
            who = ""
        keyed.setdefault((cl.cta, cl.role, cl.role_name, cl.instances, who), []).append(cl.instance)
    out = []
    for (cta, _, role, instances, who), inst in keyed.items():
        inst = sorted(set(inst))
        name = role
        if instances > 1:
            contiguous = inst == list(range(inst[0], inst[-1] + 1))
            name += (f"[{inst[0]}]" if len(inst) == 1 else f"[{inst[0]}..{inst[-1]}]" if contiguous
                     else f"[{','.join(map(str, inst))}]")
        if any(p[0].label.startswith("cta") for p in parts):
            name = f"cta{cta}.{name}"
        out.append(f"{name} {who}".rstrip())
    return out
