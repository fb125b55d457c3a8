"""The configurations one spec stands for, split into classes that explore identically.

A configuration fixes what PTX leaves open and the spec does not: the lane each
`elect(mask)` picks (SEMANTICS 2) and every kernel-scope `choose`. Lanes that z3 finds
interchangeable (symbolic/classes.py) are explored once; then two configurations whose
thread classes have the same code and sizes explore the same graph, so one representative
per class is explored, and a finding's condition is the set of configurations whose class
shows it.
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

from ..core.diagnostics import error
from ..core.records import record
from ..lang.check import CheckedKernel
from ..lang.lower import RoleCode, build_classes, signature_nodes
from ..model.ir import Site
from ..model.ir import RChoice, ROp
from ..model.threads import Config, ThreadClass, lowest_lane
from ..symbolic.classes import LanePartition, elect_orbits, lane_partition

MAX_CONFIGS = 1024  # configurations per parameter point; each builds its thread classes (docs/errors.md)


@record
class ElectSite:
    mask: int
    line: int
    file: str
    where: str = ""  # PTX: the CUDA source of the elect.sync, `cluster_sm90.hpp:194 in sm90_..._pingpong.hpp:395`


def elect_call(mask: int, esites: list[ElectSite]) -> str:
    """How a report names the elections of one member mask: `elect() (line 36, 47)`, or for PTX the
    source lines of the `elect.sync` instructions."""
    mine = [s for s in esites if s.mask == mask]
    if any(s.where for s in mine):
        wheres = list(dict.fromkeys(s.where for s in mine if s.where))
        more = f" and {len(wheres) - 3} more" if len(wheres) > 3 else ""
        call = "elect.sync" if mask == 0xFFFFFFFF else f"elect.sync({mask:#x})"
        return f"{call} ({', '.join(wheres[:3])}{more})"
    lines = sorted({s.line for s in mine})
    where = f" (line {', '.join(map(str, lines))})" if lines else ""
    call = "elect()" if mask == 0xFFFFFFFF else f"elect({mask:#x})"
    return f"{call}{where}"


@dataclass
class ConfigClass:
    representative: Config
    members: list[Config]
    classes: list[ThreadClass]
    partition: LanePartition | None = None  # the z3 lane classes behind it (None with --elect lowest)

    def is_hardware(self, masks: list[int]) -> bool:
        """Whether the H200's choice (lowest lane of each mask) belongs to this class."""
        return any(all(c.elected(m, True) == lowest_lane(m) for m in masks) for c in self.members)


def elect_sites(codes: list[RoleCode], sites: list[Site]) -> list[ElectSite]:
    out: list[ElectSite] = []

    def walk(stmts):
        for s in stmts:
            if s[0] == "coll" and s[1][0] == "elect":
                sp = sites[s[2]].span
                out.append(ElectSite(s[1][1], sp.line, sp.file))
            elif s[0] == "block":
                walk(s[1])
            elif s[0] == "for":
                walk(s[4])
            elif s[0] == "if":
                walk(s[2])
                walk(s[3])

    for code in codes:
        walk(code.body)
    return out


def _choice_values(kernel: CheckedKernel) -> list[tuple[str, list[tuple[int, ...]]]]:
    out = []
    total = 1
    for c in kernel.kchooses:
        n = 1
        for d in c.dims:
            n *= d
        # count before listing: `choose w[64]` alone stands for 2^64 configurations
        total *= max(c.hi - c.lo + 1, 1) ** n
        if total > MAX_CONFIGS:
            raise error("limit", f"the kernel-scope choices up to `{c.name}` have {_count(total)} combinations; "
                        f"pipecheck explores at most {MAX_CONFIGS} configurations: narrow a `choose` range or "
                        "its array", c.span)
        out.append((c.name, list(itertools.product(range(c.lo, c.hi + 1), repeat=n))))
    return out


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about 10^{len(str(n)) - 1}"


def config_classes(kernel: CheckedKernel, codes: list[RoleCode], elect: str,
                   cache: dict | None = None) -> list[ConfigClass]:
    """Every configuration, grouped by the thread classes it produces; representatives first-lowest.

    The elected lanes are split by z3 (symbolic.classes): one representative per orbit of
    interchangeable lanes; configurations whose thread classes coincide are merged after that.
    """
    masks = sorted({m for code in codes for m in code.elect_masks})
    choices = _choice_values(kernel)
    total = 1
    for _, vals in choices:
        total *= len(vals)
    cache = {} if cache is None else cache
    groups: dict[frozenset, ConfigClass] = {}
    programs: dict = {}  # per thread and what its program reads of a configuration (`build_classes`)
    explored = 0
    for vals in itertools.product(*[v for _, v in choices]):
        chosen = tuple((name, v) for (name, _), v in zip(choices, vals))
        partition = None
        if elect == "lowest" or not masks:
            low = tuple(lowest_lane(m) for m in masks)
            orbits = [(low, [low])]
        elif elect.isdigit():  # one lane forced where the mask has it (`replay --elect-lane N`)
            lane = int(elect)
            pick = tuple(lane if m >> lane & 1 else lowest_lane(m) for m in masks)
            orbits = [(pick, [pick])]
        else:
            partition = _partition(kernel, codes, masks, dict(chosen), cache)
            orbits = elect_orbits(partition, masks)
        explored += len(orbits)
        if max(explored, total) > MAX_CONFIGS:
            raise error("limit", f"the spec has at least {max(explored, total)} configurations (classes of elected lanes x "
                        f"kernel choices); pipecheck explores at most {MAX_CONFIGS}: narrow a `choose` range or "
                        "pass --elect lowest", kernel.span)
        for rep, picks in orbits:
            cfg = Config(tuple(zip(masks, rep)), chosen)
            members = [Config(tuple(zip(masks, pick)), chosen) for pick in picks]
            classes = build_classes(kernel, codes, cfg, elect == "lowest", programs)
            key = class_multiset(classes)
            if key in groups:
                groups[key].members.extend(members)
            else:
                groups[key] = ConfigClass(cfg, members, classes, partition)
    return list(groups.values())


def class_multiset(classes: list[ThreadClass]) -> frozenset:
    """What a configuration's exploration depends on: its thread classes' shapes, in any order.

    The model reads a class only through its shape (`ThreadClass.shape_key`) and treats the classes alike
    whatever their order, so two configurations whose classes pair up shape for shape have isomorphic state
    graphs: electing lane 2 or lane 3 of a warp whose lanes 0 and 1 also stand apart lists the elected
    lane's class before or after the other lanes' (classes are ordered by their lowest member), and is
    one exploration."""
    return frozenset(Counter(cl.shape_key() for cl in classes).items())


def _partition(kernel: CheckedKernel, codes: list[RoleCode], masks: list[int], chosen: dict, cache: dict) -> LanePartition:
    """The z3 lane partition, cached on everything it reads (signature nodes, role shapes, the choices they name)."""
    nodes = tuple((c.role_index, tuple(signature_nodes(c))) for c in codes if c.elect_masks)
    named = {n for _, ns in nodes for node in ns for n in _choice_names(node)}
    shapes = tuple((r.instances, r.threads) for r in kernel.roles)
    key = (tuple(masks), nodes, shapes, kernel.cluster, tuple(sorted((n, v) for n, v in chosen.items() if n in named)))
    if key not in cache:
        cache[key] = lane_partition(kernel, codes, masks, chosen)
    return cache[key]


def _choice_names(e) -> set[str]:
    if isinstance(e, RChoice):
        return {e.name}.union(*(_choice_names(i) for i in e.index))
    if isinstance(e, ROp):
        return set().union(*(_choice_names(a) for a in e.args))
    return set()


def _lanes_text(lanes: list[int]) -> str:
    lanes = sorted(set(lanes))
    if len(lanes) == 1:
        return f"lane {lanes[0]}"
    parts = []
    start = prev = lanes[0]
    for x in lanes[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(f"{start}" if start == prev else f"{start}..{prev}")
        if x is not None:
            start = prev = x
    return "a lane in " + ", ".join(parts)


def describe(configs: list[Config], all_configs: list[Config], esites: list[ElectSite]) -> str:
    """The condition under which a finding appears, in the spec's words; '' when it always does."""
    if len(configs) == len(all_configs):
        return ""
    parts = []
    masks = sorted({m for c in all_configs for m, _ in c.elect})
    for m in masks:
        chosen = sorted({c.elected(m, False) for c in configs})
        every = sorted({c.elected(m, False) for c in all_configs})
        if chosen != every:
            parts.append(f"{elect_call(m, esites)} elects {_lanes_text(chosen)}")
    names = sorted({n for c in all_configs for n, _ in c.choices})
    for n in names:
        chosen = sorted({c.choice(n) for c in configs})
        every = sorted({c.choice(n) for c in all_configs})
        if chosen != every:
            if len(chosen) == 1:
                v = chosen[0]
                parts.append(f"{n} = {v[0] if len(v) == 1 else list(v)}")
            else:
                parts.append(f"{n} in {{{', '.join(str(v[0]) if len(v) == 1 else str(list(v)) for v in chosen)}}}")
    return " and ".join(parts)
