"""A PTX function body as one flat list of instructions: scopes resolved, calls inlined.

Inline-asm scopes declare their own registers (`%rx`, `P1`) and labels (`LAB_WAIT`, `DONE`)
that repeat in every scope; each scope's names get a unique suffix here, so later stages
see one namespace. A `call` to a `.func` of the module is inlined: its parameters and
return values become registers, its `ret` a branch to the instruction after the call.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.diagnostics import Span, SpecError, error
from . import syntax as X

MAX_INLINE_DEPTH = 16
TRAPS = frozenset({"__assertfail", "__assert_fail"})  # CUDA's device assert: prints, then traps
PRINTS = frozenset({"vprintf"})
MAX_INSTRUCTIONS = 400_000  # instructions of an entry after inlining (docs/errors.md)
SPECIAL = ("%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid", "%gridid",
           "%cluster_ctarank", "%cluster_nctarank", "%cluster_ctaid", "%cluster_nctaid", "%clusterid", "%nclusterid",
           "%is_explicit_cluster", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
           "%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%dynamic_smem_size",
           "%total_smem_size", "%aggr_smem_size", "%envreg", "%pm", "%reserved_smem_offset")


@dataclass(frozen=True)
class Op:
    """One instruction of the flat body. Register names are unique; branch targets are indices."""

    opcode: str
    operands: tuple[X.Operand, ...]
    guard: str | None  # register name
    negated: bool
    line: int
    col: int
    loc: X.Loc | None = field(compare=False)
    target: int = -1  # bra: index of the target instruction
    call_depth: int = 0

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


@dataclass
class Body:
    """An entry flattened: its instructions and the type of every register."""

    ops: list[Op]
    regs: dict[str, str]  # register -> type (`.b32`, `.pred`, ...)
    file: str

    def span(self, i: int) -> Span:
        op = self.ops[i]
        return Span(self.file, op.line, op.col + 1)


class _Flattener:
    def __init__(self, module: X.Module, file: str):
        self.module = module
        self.file = file
        self.ops: list[Op] = []
        self.regs: dict[str, str] = {}
        self.fixups: list[tuple[int, str]] = []  # (op index, unique label name)
        self.labels: dict[str, int] = {}
        self.scope_id = 0
        self.param_regs: set[str] = set()  # `.param` symbols of calls, held in registers

    # ------------------------------------------------------------ names
    def _declare(self, scopes: list[dict], decl: X.Decl, suffix: str) -> None:
        typ = next((w for w in decl.words if w.startswith(".") and w not in (".reg", ".align", ".param")), ".b32")
        for name in decl.names:
            unique = name + suffix
            scopes[-1][name] = unique
            self.regs[unique] = typ
            if decl.kind == "param":
                self.param_regs.add(unique)
        for prefix, count in decl.ranges:
            scopes[-1][prefix + "<>"] = (suffix, count)
            for i in range(count):
                self.regs[f"{prefix}{i}{suffix}"] = typ

    def _resolve(self, scopes: list[dict], name: str) -> str | None:
        for sc in reversed(scopes):
            hit = sc.get(name)
            if isinstance(hit, str):
                return hit
        i = len(name)
        while i > 0 and name[i - 1].isdigit():
            i -= 1
        if 0 < i < len(name):  # a name of a `%r<N>` range
            prefix, num = name[:i], int(name[i:])
            for sc in reversed(scopes):
                hit = sc.get(prefix + "<>")
                if hit is not None and num < hit[1]:
                    return f"{prefix}{num}{hit[0]}"
        return None

    def _operand(self, scopes: list[dict], o: X.Operand, line: int) -> X.Operand:
        if isinstance(o, X.Reg):
            if o.name.split(".")[0] in SPECIAL or any(o.name.startswith(s) for s in ("%envreg",)):
                return o
            r = self._resolve(scopes, o.name)
            if r is None:
                raise error("syntax", f"PTX: register {o.name} is not declared", Span(self.file, line, 1))
            return X.Reg(r)
        if isinstance(o, X.Sym):
            r = self._resolve(scopes, o.name)
            return X.Reg(r) if r is not None else o
        if isinstance(o, X.BinOp):
            return X.BinOp(o.op, self._operand(scopes, o.a, line), self._operand(scopes, o.b, line))
        if isinstance(o, X.Neg):
            return X.Neg(self._operand(scopes, o.a, line))
        if isinstance(o, X.Not):
            return X.Not(self._operand(scopes, o.a, line))
        if isinstance(o, X.Addr):
            return X.Addr(tuple(self._operand(scopes, p, line) for p in o.parts))
        if isinstance(o, X.Vec):
            return X.Vec(tuple(self._operand(scopes, p, line) for p in o.items))
        if isinstance(o, X.Pair):
            return X.Pair(self._operand(scopes, o.a, line), self._operand(scopes, o.b, line))
        if isinstance(o, X.PList):
            return X.PList(tuple(self._operand(scopes, p, line) for p in o.items))
        return o

    # ------------------------------------------------------------ bodies
    def function(self, fn: X.Function, scopes: list[dict], depth: int, ret_label: str | None,
                 bind: dict[str, str]) -> None:
        assert fn.body is not None
        self.scope_id += 1
        suffix = f"#{self.scope_id}" if depth or scopes else ""
        top: dict = dict(bind)
        labels: dict = {}
        scopes = scopes + [top]
        self._scope(fn.body, scopes, labels, suffix, depth, ret_label, top_level=True)

    def _scope(self, scope: X.Scope, scopes: list[dict], labels: dict, suffix: str, depth: int,
               ret_label: str | None, top_level: bool = False) -> None:
        if not top_level:
            self.scope_id += 1
            suffix = f"#{self.scope_id}"
            scopes = scopes + [{}]
            labels = {}
        # labels of this scope first: branches may jump forward
        for it in scope.items:
            if isinstance(it, X.Label):
                labels[it.name] = it.name + suffix
        scopes[-1].setdefault("<labels>", labels)
        for it in scope.items:
            if isinstance(it, X.Decl):
                if it.kind in ("reg", "param"):
                    self._declare(scopes, it, suffix)
            elif isinstance(it, X.Label):
                self.labels[labels[it.name]] = len(self.ops)
            elif isinstance(it, X.Scope):
                self._scope(it, scopes, labels, suffix, depth, ret_label)
            elif isinstance(it, X.Instr):
                self._instr(it, scopes, depth, ret_label)

    def _label_of(self, scopes: list[dict], name: str) -> str | None:
        for sc in reversed(scopes):
            hit = sc.get("<labels>", {}).get(name)
            if hit is not None:
                return hit
        return None

    def _instr(self, ins: X.Instr, scopes: list[dict], depth: int, ret_label: str | None) -> None:
        if len(self.ops) > MAX_INSTRUCTIONS:
            raise error("limit", f"PTX: more than {MAX_INSTRUCTIONS} instructions after inlining calls",
                        Span(self.file, ins.line, ins.col + 1))
        guard = None
        if ins.guard is not None:
            g = self._resolve(scopes, ins.guard.name)
            if g is None:
                raise error("syntax", f"PTX: predicate {ins.guard.name} is not declared", Span(self.file, ins.line, ins.col + 1))
            guard = g
        base = ins.base
        if base == "bra" or base == "brx":
            tgt = ins.operands[0] if ins.operands else None
            name = tgt.name if isinstance(tgt, (X.Sym, X.Reg)) else None
            lab = self._label_of(scopes, name) if name else None
            if lab is None:
                raise error("syntax", f"PTX: branch to an unknown label {name!r}", Span(self.file, ins.line, ins.col + 1))
            self.fixups.append((len(self.ops), lab))
            self.ops.append(Op(ins.opcode, (), guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))
            return
        if base == "ret" and ret_label is not None:
            self.fixups.append((len(self.ops), ret_label))
            self.ops.append(Op("bra.uni", (), guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))
            return
        if base == "call":
            self._call(ins, scopes, depth, guard)
            return
        operands = tuple(self._operand(scopes, o, ins.line) for o in ins.operands)
        if base in ("ld", "st") and ".param" in ins.opcode and len(operands) == 2:
            # a call's parameter or return value, held in a register: the load or store is a move
            addr, other = (operands[1], operands[0]) if base == "ld" else (operands[0], operands[1])
            if isinstance(addr, X.Addr) and len(addr.parts) == 1 and isinstance(addr.parts[0], X.Reg) \
                    and addr.parts[0].name in self.param_regs:
                typ = "." + ins.opcode.rsplit(".", 1)[-1]
                dst, src = (other, addr.parts[0]) if base == "ld" else (addr.parts[0], other)
                self.ops.append(Op("mov" + typ, (dst, src), guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))
                return
        self.ops.append(Op(ins.opcode, operands, guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))

    def _call(self, ins: X.Instr, scopes: list[dict], depth: int, guard: str | None) -> None:
        span = Span(self.file, ins.line, ins.col + 1)
        rets: tuple = ()
        ops = list(ins.operands)
        if ops and isinstance(ops[0], X.PList):
            rets = ops.pop(0).items
        callee = ops.pop(0) if ops else None
        args = ops.pop(0).items if ops and isinstance(ops[0], X.PList) else ()
        name = callee.name if isinstance(callee, X.Sym) else None
        fn = self.module.function(name) if name else None
        if fn is None and name in TRAPS:  # a failed device-side assert: the kernel stops (CUDA's assert())
            self.ops.append(Op("trap.assert", (), guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))
            return
        if fn is None and name in PRINTS:  # printf: nothing the protocol sees
            self.ops.append(Op("nop.printf", (), guard, ins.negated, ins.line, ins.col, ins.loc, -1, depth))
            return
        if fn is None:
            raise error("rule", f"PTX: call to {name or 'an indirect target'}, whose body is not in the module: "
                        "pipecheck inlines calls and cannot check code it does not see", span)
        if depth >= MAX_INLINE_DEPTH:
            raise error("limit", f"PTX: calls nest deeper than {MAX_INLINE_DEPTH} (recursion?)", span)
        if guard is not None:
            raise error("rule", "PTX: a predicated call is not supported; branch around it", span)
        self.scope_id += 1
        tag = f"#c{self.scope_id}"
        bind: dict[str, str] = {}
        # caller-side names: `.param` symbols declared in the caller's scope carry the values
        for p, a in list(zip(fn.params, args)) + list(zip(fn.returns, rets)):
            bind[p.name] = self._sym_reg(scopes, a)
            self.regs.setdefault(bind[p.name], p.type)
            self.param_regs.add(bind[p.name])
        after = f"<after{tag}>"
        self.function(fn, scopes, depth + 1, after, bind)
        self.labels[after] = len(self.ops)
        self.ops.append(Op("nop.call_return", (), None, False, ins.line, ins.col, ins.loc, -1, depth))

    def _sym_reg(self, scopes: list[dict], o: X.Operand) -> str:
        """The register standing for a call argument: a `.param` symbol declared by the caller, or a register."""
        if isinstance(o, (X.Sym, X.Reg)):
            r = self._resolve(scopes, o.name)
            if r is not None:
                return r
            return o.name
        raise error("rule", "PTX: a call argument that is not a parameter symbol or register", None)

    def finish(self) -> Body:
        out = list(self.ops)
        for i, lab in self.fixups:
            tgt = self.labels.get(lab)
            if tgt is None:
                op = out[i]
                raise error("syntax", f"PTX: branch to an unknown label {lab.split('#')[0]!r}",
                            Span(self.file, op.line, op.col + 1))
            op = out[i]
            out[i] = Op(op.opcode, op.operands, op.guard, op.negated, op.line, op.col, op.loc, tgt, op.call_depth)
        out.append(Op("exit", (), None, False, out[-1].line if out else 0, 0, None))
        return Body(out, self.regs, self.file)


def flatten(module: X.Module, entry: X.Function) -> Body:
    """The entry's instructions in order, with one `exit` appended (falling off the end exits)."""
    f = _Flattener(module, module.path)
    try:
        f.function(entry, [], 0, None, {})
    except RecursionError:
        raise error("limit", "PTX: scopes nest too deeply", Span(module.path, entry.line, 1)) from None
    return f.finish()


__all__ = ["Body", "Op", "SpecError", "flatten"]
