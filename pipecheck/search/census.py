"""Where a state space comes from (`verify --stats`): the visited states taken apart by role instance,
thread class and the other parts of a state, and what the reduction offered in them.

It reads the visited keys that `explore` keeps when the compact visited set asks for a census
(`visited.Interner(census=True)`), decodes them back to their parts, and returns plain data.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..model.ir import END
from ..model.system import Model

# the parts of a state besides where the threads stand, as the census names them
_PARTS = (("bars", "barrier states"), ("bufs", "buffer tags"), ("flight", "copies in flight"),
          ("colls", "collectives part-arrived"), ("mmas", "MMA unit states"), ("stores", "bulk stores in flight"),
          ("dirty", "unfenced writes"), ("vis", "unpublished inits"), ("commits", "commit arrivals owed"))
TOP_SPLITS = 3  # the places of a split class named, most frequent first


def census(model: Model, exploration: Any) -> dict | None:
    """Per role instance and thread class: the distinct places it took (where its groups stand, with their
    registers) and in how many states it stood split (its threads at several places), with the places of
    the most frequent splits; per other part of a state, its distinct values; the reduction's sets.
    None when the run kept no visited keys (--no-compact, or no --stats)."""
    kept = exploration.extra.get("visited")
    if kept is None:
        return None
    interner, keys = kept
    fields = interner.fields
    if "locs" not in fields:
        return None
    li = fields.index("locs")
    ncls = len(model.classes)
    placements = [interner.values("locs", c) if c < len(interner.split[li]) else [] for c in range(ncls)]
    groups = [[len(v) for v in vals] for vals in placements]
    units: dict[str, list[int]] = {}
    for cl in model.classes:
        units.setdefault(cl.unit or cl.label, []).append(cl.id)
    split_states = [0] * ncls
    split_places: list[Counter] = [Counter() for _ in range(ncls)]
    unit_places: dict[str, set] = {u: set() for u in units}
    for key in keys:
        ids = interner.decode(key)[li]
        for c, i in enumerate(ids):
            if groups[c][i] > 1:
                split_states[c] += 1
                split_places[c][i] += 1
        for u, cls in units.items():
            unit_places[u].add(tuple(ids[c] for c in cls))
    classes = []
    for cl in model.classes:
        c = cl.id
        vals = placements[c]
        splits = []
        by_places: Counter = Counter()  # by the statements its groups stand at (a collective is two places)
        for i, n in split_places[c].items():
            places = {_place(model, c, pc) for (pc, _), _ in vals[i]}
            by_places[tuple(sorted(places, key=lambda p: (p[0] is None, p[0] or 0, p[1])))] += n
        for places, n in sorted(by_places.items(), key=lambda kv: (-kv[1], [(ln is None, ln or 0, t) for ln, t in kv[0]])
                                )[:TOP_SPLITS]:
            splits.append({"states": n, "places": [{"line": line, "statement": text} for line, text in places]})
        classes.append({"class": cl.label, "unit": cl.unit or cl.label, "threads": cl.size,
                        "places": len(vals), "statements": len({pc for v in vals for (pc, _), _ in v}),
                        "split_states": split_states[c], "most_groups": max(groups[c], default=0),
                        "splits": splits})
    roles = [{"unit": u, "classes": len(cls), "places": len(unit_places[u])} for u, cls in units.items()]
    parts = []
    for name, words in _PARTS:
        if name not in fields:
            continue
        k = fields.index(name)
        n = sum(len(t) for t in interner.split[k]) if interner.layout[k] else len((interner.whole or [])[k])
        parts.append({"part": name, "what": words, "distinct": n})
    ex = exploration.extra
    reduction = None
    if "reduced" in ex:
        reduction = {"reduced_states": ex["reduced"], "unreduced_states": ex["full"], "chained": ex.get("chained", 0),
                     "lengthened": ex.get("lengthened", 0), "sets": [{"processes": "+".join(kind), "states": n} for kind, n in ex["sets"]]}
    return {"states": exploration.states, "roles": roles, "classes": classes, "parts": parts,
            "reduction": reduction}


def _place(model: Model, c: int, pc: int) -> tuple[int | None, str]:
    """(line, statement) of a program point; (None, "end") past the last statement."""
    ins = model.code[c][pc]
    site = model.sites[ins.site] if 0 <= ins.site < len(model.sites) else None
    if site is None:
        return None, "end" if ins.op is END else str(ins.op)
    return site.span.line, site.text


def render_census(census_data: dict, head: str) -> str:
    """The census as text lines for stderr: roles, then classes (split ones with their places), parts, sets."""
    out = [f"{head}: where the {census_data['states']:,} states come from"]
    out.append("  role instance: distinct places of its classes together")
    for r in sorted(census_data["roles"], key=lambda r: -r["places"]):
        out.append(f"    {r['unit']}: {r['places']:,} ({r['classes']} class{'es' if r['classes'] != 1 else ''})")
    out.append("  thread class: distinct places (statements); states where its threads stand apart (a class splits "
               "where only some of its threads can pass, e.g. a collective releasing fewer than arrived)")
    for c in sorted(census_data["classes"], key=lambda c: (-c["places"], c["class"])):
        line = f"    {c['class']}: {c['places']:,} ({c['statements']})"
        if c["split_states"]:
            line += f", split in {c['split_states']:,} states (up to {c['most_groups']} groups)"
        out.append(line)
        for s in c["splits"]:
            where = "; ".join(f"line {p['line']} `{p['statement']}`" if p["line"] is not None else p["statement"]
                              for p in s["places"])
            out.append(f"      {s['states']:,} state{'s' if s['states'] != 1 else ''} with its threads at: {where}")
    parts = [p for p in census_data["parts"] if p["distinct"] > 1]
    if parts:
        out.append("  other parts: distinct values")
        out.append("    " + ", ".join(f"{p['what']} {p['distinct']:,}" for p in parts))
    red = census_data["reduction"]
    if red is not None:
        sets = ", ".join(f"{s['processes']} {s['states']:,}" for s in red["sets"][:6])
        out.append(f"  partial-order reduction: a smaller set in {red['reduced_states']:,} states ({sets}); "
                   f"every enabled process in {red['unreduced_states']:,}")
        if red.get("chained"):
            out.append(f"  private runs: {red['chained']:,} steps taken within a thread group's move, with no state "
                       "of their own")
        if red.get("lengthened"):
            out.append(f"  longer futures: a smaller set in {red['lengthened']:,} states once the futures a walk ran "
                       "past (cut off at the horizon) were lengthened")
    return "\n".join(out) + "\n"
