"""The wait-for graph at a hang, and the one-sentence explanation read off it.

Nodes are thread classes and barriers; a class points at the barrier (or collective) it is
stuck on, a barrier at the classes that could still arrive on it. A barrier nobody can
arrive on, or whose bytes can never balance, is the root cause.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.words import join_words
from ..model.threads import compact_names
from ..model.ir import (COLL_WAIT, END, MMA_WAIT, WAIT)
from ..model.state import State
from ..model.system import Model

if TYPE_CHECKING:
    pass


def _arrive_sites(model: Model, name: str) -> list[int]:
    """Sites of statements that arrive on barrier array `name`, from every class's program."""
    out = []
    for site_idx, site in enumerate(model.sites):
        t = site.text
        if (t.startswith("arrive ") or t.startswith("arrive_drop ")) and t.split()[1].split("[")[0] == name:
            out.append(site_idx)
    return out


def _reached_sites(model: Model) -> set[int]:
    return {ins.site for cl in model.classes for ins in cl.program.instrs}


@dataclass
class WaitFor:
    """The wait-for graph at one state: a few dozen nodes, read once per hang report (plain dicts keep
    networkx, a third of a second to import, off the path of every failing run)."""
    succ: dict[Any, dict[Any, None]] = field(default_factory=dict)
    pred: dict[Any, dict[Any, None]] = field(default_factory=dict)
    labels: dict[Any, str] = field(default_factory=dict)

    @property
    def nodes(self) -> list:
        return list(self.succ)

    def add_node(self, n: Any, label: str = "") -> None:
        self.succ.setdefault(n, {})
        self.pred.setdefault(n, {})
        if label:
            self.labels[n] = label

    def add_edge(self, a: Any, b: Any) -> None:
        self.add_node(a)
        self.add_node(b)
        self.succ[a][b] = None
        self.pred[b][a] = None

    def has_node(self, n: Any) -> bool:
        return n in self.succ

    def out_degree(self, n: Any) -> int:
        return len(self.succ[n])

    def predecessors(self, n: Any) -> list:
        return list(self.pred[n])

    def successors(self, n: Any) -> list:
        return list(self.succ[n])


def wait_for_graph(model: Model, s: State) -> WaitFor:
    g = WaitFor()
    futures = {}
    for c, groups in enumerate(s.locs):
        for gi, ((pc, env), m) in enumerate(groups):
            if model.code[c][pc].op is END:
                continue
            futures[(c, gi)] = model.future(c, pc, env, m)[0]
    for (c, gi), ops in futures.items():
        (pc, env), m = s.locs[c][gi]
        ins = model.code[c][pc]
        node = ("class", c)
        g.add_node(node, label=model.classes[c].label)
        if ins.op is WAIT:
            gid = ins.a(env, model.classes[c].cta)
            g.add_edge(node, ("bar", gid))
        elif ins.op is COLL_WAIT:
            key, n = model.coll_key(c, ins, env)
            g.add_edge(node, ("coll", key))
        elif ins.op is MMA_WAIT:
            g.add_edge(node, ("mma", model.mma_unit[c]))
    for (c, gi), ops in futures.items():
        for d in ops:
            if d[0] in ("arrive", "tx"):
                if g.has_node(("bar", d[1])):
                    g.add_edge(("bar", d[1]), ("class", c))
            elif d[0] == "coll" and g.has_node(("coll", d[1])):
                g.add_edge(("coll", d[1]), ("class", c))
            elif d[0] == "join" and g.has_node(("mma", d[1])):
                g.add_edge(("mma", d[1]), ("class", c))
    return g


def _who(model: Model, s: State, classes: set[int]) -> str:
    """Name blocked classes by role instance when every unfinished class of it is among them, else by warps
    or thread ranges, instances alike merged (`consumer[0..1] warps 1-3`)."""
    units: dict[str, list[int]] = {}
    for c in sorted(classes):
        units.setdefault(model.classes[c].unit, []).append(c)
    groups = []
    for unit, ks in units.items():
        unit_classes = {k for k, cl in enumerate(model.classes) if cl.unit == unit
                        and any(model.code[k][pc].op is not END for (pc, _), _ in s.locs[k])}
        members = frozenset(t for k in ks for t in model.classes[k].members)
        groups.append((model.classes[ks[0]], members, unit_classes <= set(ks)))
    return join_words(compact_names(groups))


def _plural_who(who: str) -> bool:
    """Whether a name from `_who` stands for several groups (`a and b`, `consumer[0..1]`, `warps 1-3`)."""
    return (" and " in who or "," in who or ".." in who
            or any(f" {w} " in f" {who} " for w in ("lanes", "threads", "warps")))


def explain_hang(model: Model, s: State, config_text: str = "") -> str:
    """One sentence (or two) on why every blocked thread stays blocked."""
    g = wait_for_graph(model, s)
    reached = _reached_sites(model)
    parts: list[str] = []
    roots = [n for n in g.nodes if n[0] in ("bar", "coll", "mma") and g.out_degree(n) == 0]
    roots.sort(key=lambda n: str(n))
    for root in roots:
        waiters = sorted({w[1] for w in g.predecessors(root)})
        who = _who(model, s, set(waiters))
        verb = "wait" if _plural_who(who) else "waits"
        if root[0] == "bar":
            gid = root[1]
            b = s.bars[gid]
            name = model.layout.bar_names[gid]
            if b is None:
                parts.append(f"{who} {verb} on {name}, which was never initialised")
                continue
            owed = []
            if b.pending:
                owed.append(f"{b.pending} more arrival{'s' if b.pending != 1 else ''}")
            if b.tx > 0:
                owed.append(f"{b.tx} announced tx bytes that no load will deliver")
            elif b.tx < 0:
                owed.append(f"an expect_tx for the {-b.tx} bytes that already landed")
            need = " and ".join(owed) if owed else "nothing (it is waiting on the wrong parity)"
            sentence = f"{who} {verb} for {name} to complete phase {b.phase}, which still needs {need}"
            array = name.split("[")[0].split(".")[-1]
            if b.pending:
                sites = _arrive_sites(model, array)
                live = [i for i in sites if i in reached]
                dead = [i for i in sites if i not in reached]
                if sites and not live:
                    lines = ", ".join(str(model.sites[i].span.line) for i in dead)
                    cond = f" when {config_text}" if config_text else ""
                    sentence += f"; no thread ever reaches the arrive on {array} (line {lines}){cond}"
                else:
                    sentence += "; no thread that is still running will arrive on it"
            elif b.tx < 0:
                sentence += ": expect_tx announced fewer bytes than the TMA loads deliver (a box counts in full, out-of-bounds elements included)"
            elif b.tx > 0:
                sentence += ": expect_tx announced more bytes than the TMA loads deliver"
            parts.append(sentence)
        elif root[0] == "coll":
            parts.append(f"{who} {verb} at a collective ({_coll_text(root[1])}) that some of its threads never reach")
        else:
            parts.append(f"{who} {verb} for mma_async groups that can never form")
    # the chain: who else is blocked behind the roots
    for node in sorted(g.nodes, key=str):
        if node[0] == "bar" and g.out_degree(node) > 0:
            waiters = {w[1] for w in g.predecessors(node)}
            if not waiters:
                continue
            arrivers = {a[1] for a in g.successors(node)}
            plural = "" if _plural_who(_who(model, s, waiters)) else "s"
            parts.append(f"{_who(model, s, waiters)} wait{plural} on {model.layout.bar_names[node[1]]}, "
                         f"which only {_who(model, s, arrivers)} would arrive on")
    if not parts:
        return "every remaining thread is blocked and nothing in flight can unblock one"
    text = "; ".join(parts[:1]) + "."
    if len(parts) > 1:
        text += " " + "; ".join(p[0].upper() + p[1:] for p in parts[1:3]) + "."
    return text


def _coll_text(key: tuple) -> str:
    kind = key[0]
    if kind == "e":
        return "elect()"
    if kind == "w":
        return "syncwarp"
    if kind == "b":
        return f"named barrier {key[2]}" if key[2] else "syncthreads"
    if kind == "n":
        return "setmaxnreg"
    return "cluster_sync"
