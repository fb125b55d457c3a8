"""A PTX module as read: functions with their directives and parameters, scopes of register
declarations, labels and guarded instructions with their operands and source locations.

Frozen dataclasses, built by `parse`; nothing here knows what an opcode means (`isa` does).
"""
from __future__ import annotations

from dataclasses import dataclass, field


# ---------------------------------------------------------------- operands


@dataclass(frozen=True)
class Reg:
    name: str  # `%r12`, `%tid.x`, or a scoped name written without `%` (`P1`, `remAddr32`)


@dataclass(frozen=True)
class Imm:
    value: int


@dataclass(frozen=True)
class FImm:
    """A floating-point immediate: `0f3F800000` (bits of an f32), `0d...` (f64) or a decimal."""

    value: float


@dataclass(frozen=True)
class Sym:
    name: str  # a label, a variable or parameter symbol, or a function


@dataclass(frozen=True)
class BinOp:
    op: str  # "+" | "-"
    a: "Operand"
    b: "Operand"


@dataclass(frozen=True)
class Neg:
    a: "Operand"


@dataclass(frozen=True)
class Not:
    a: "Operand"


@dataclass(frozen=True)
class Addr:
    """`[base + offset]`, or a list like `[tensormap, {c0, c1}]`."""

    parts: tuple["Operand", ...]


@dataclass(frozen=True)
class Vec:
    items: tuple["Operand", ...]


@dataclass(frozen=True)
class Pair:
    """`%r1|%p1`: a result register and its predicate (elect.sync, shfl.sync)."""

    a: "Operand"
    b: "Operand"


@dataclass(frozen=True)
class PList:
    items: tuple["Operand", ...]  # `(param0, param1)` in a call


@dataclass(frozen=True)
class Sink:
    pass


Operand = Reg | Imm | FImm | Sym | BinOp | Neg | Not | Addr | Vec | Pair | PList | Sink


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class Loc:
    """A `.loc`: the CUDA source position of what follows, and where it was inlined (a chain)."""

    file: int
    line: int
    col: int
    function: str | None = None  # the `.debug_str` label of the inlined function
    inlined_at: "Loc | None" = None


@dataclass(frozen=True)
class Instr:
    opcode: str  # the whole dotted opcode: `mbarrier.try_wait.parity.shared::cta.b64`
    operands: tuple[Operand, ...]
    line: int
    col: int
    guard: Reg | None = None
    negated: bool = False  # `@!%p`
    loc: Loc | None = field(default=None, compare=False)

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class Label:
    name: str
    line: int


@dataclass(frozen=True)
class Decl:
    """A declaration inside a body: `.reg .b32 %r<10>;`, `.shared .align 8 .b8 x[16];`, `.param .b64 p;`."""

    kind: str  # reg | shared | local | param | global | const | pragma | other
    words: tuple[str, ...]  # the type and other qualifiers (`.b32`, `.align`, `8`)
    names: tuple[str, ...]  # declared names
    dims: tuple[int, ...]
    line: int
    ranges: tuple[tuple[str, int], ...] = ()  # `%r<10>`: ("%r", 10), the names %r0 .. %r9


@dataclass(frozen=True)
class Scope:
    items: tuple["Stmt", ...]
    line: int


Stmt = Instr | Label | Decl | Scope


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # `.b8`, `.u32`, ...
    size: int  # bytes
    align: int
    line: int


@dataclass(frozen=True)
class Function:
    name: str
    entry: bool  # a kernel (`.entry`), else a `.func`
    params: tuple[Param, ...]
    returns: tuple[Param, ...]
    directives: dict[str, tuple[int, ...]]  # `maxntid` -> (384, 1, 1), `reqnctapercluster`, ...
    body: Scope | None  # None: a prototype
    line: int
    visible: bool = False


@dataclass(frozen=True)
class Global:
    """A module-scope variable: `.extern .shared .align 16 .b8 smem[];`."""

    space: str  # shared | global | const
    name: str
    align: int
    type: str
    dims: tuple[int, ...]
    extern: bool
    line: int


@dataclass
class Module:
    path: str
    version: str
    target: str
    address_size: int
    functions: list[Function]
    globals: list[Global]
    files: dict[int, str]  # `.file` index -> path
    strings: dict[str, str]  # `.debug_str` label -> text (inlined function names)

    def entries(self) -> list[Function]:
        return [f for f in self.functions if f.entry and f.body is not None]

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name and f.body is not None), None)


def registers(o: "Operand") -> list[str]:
    """The registers an operand names, in order (inside addresses, expressions, vectors, `a|b` pairs)."""
    if isinstance(o, Reg):
        return [o.name]
    if isinstance(o, BinOp):
        return registers(o.a) + registers(o.b)
    if isinstance(o, (Neg, Not)):
        return registers(o.a)
    if isinstance(o, Addr):
        return [r for p in o.parts for r in registers(p)]
    if isinstance(o, (Vec, PList)):
        return [r for p in o.items for r in registers(p)]
    if isinstance(o, Pair):
        return registers(o.a) + registers(o.b)
    return []
