"""PTX text to a `syntax.Module`: the lark grammar in grammars/ptx.lark, transformed while it parses.

Syntax errors become diagnostics with file:line:col and a caret (exit 2). `.loc` lines are
attached to the instructions they precede, with the inlined-at chain nvcc records, and the
`.debug_str` section is decoded so a chain can name its functions.
"""
from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import lark
from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..core import cache
from ..core.grammars import grammar_path, grammar_text
from ..core.version import __version__
from ..core.diagnostics import Span, SpecError, error
from . import syntax as X

MAX_PTX_CHARS = 64 * 1024 * 1024  # what one file may hold (docs/errors.md)
_CACHE = f"ptx-{sys.implementation.cache_tag}"
_KEEP = 64  # modules kept (about the size of their PTX text each): past it the least recently used half goes


class _LocMark:
    """A `.loc` line inside a body, resolved to the instructions after it by `_attach`."""

    __slots__ = ("file", "line", "col", "function", "at")

    def __init__(self, file: int, line: int, col: int, function: str | None, at: tuple[int, int, int] | None):
        self.file, self.line, self.col, self.function, self.at = file, line, col, function, at


def _operand(x):
    if isinstance(x, Token):
        t = x.type
        if t == "REG":
            return X.Reg(str(x))
        if t in ("NAME", "OPCODE"):
            return X.Sym(str(x))
        if t == "INT":
            return X.Imm(_int(str(x)))
        if t == "FLOAT":
            return X.FImm(_float(str(x)))
        if t == "SINK":
            return X.Sink()
        raise ValueError(f"operand token {t}")
    return x


def _int(text: str) -> int:
    text = text.rstrip("U")
    v = int(text, 16) if text[:2] in ("0x", "0X") else int(text)
    return v


def _float(text: str) -> float:
    import struct
    if text[:2] in ("0f", "0F"):
        return struct.unpack(">f", bytes.fromhex(text[2:]))[0]
    if text[:2] in ("0d", "0D"):
        return struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    return float(text)


class _Build(Transformer):
    """Builds syntax nodes bottom-up while the LALR parser reduces (no parse tree is kept)."""

    # ------------------------------------------------------------ operands
    def add(self, c):
        return X.BinOp("+", _operand(c[0]), _operand(c[1]))

    def sub(self, c):
        return X.BinOp("-", _operand(c[0]), _operand(c[1]))

    def neg(self, c):
        a = _operand(c[0])
        return X.Imm(-a.value) if isinstance(a, X.Imm) else X.FImm(-a.value) if isinstance(a, X.FImm) else X.Neg(a)

    def not_(self, c):
        return X.Not(_operand(c[1]))

    def name(self, c):
        return X.Sym(str(c[0]))

    def address(self, c):
        return X.Addr(tuple(_operand(x) for x in c))

    def vec(self, c):
        return X.Vec(tuple(_operand(x) for x in c if x is not None))

    def plist(self, c):
        return X.PList(tuple(_operand(x) for x in c if x is not None))

    def pair(self, c):
        return X.Pair(X.Reg(str(c[0])), X.Reg(str(c[1])))

    # ------------------------------------------------------------ statements
    def guard(self, c):
        neg = len(c) == 2
        return ("guard", X.Reg(str(c[-1])), neg)

    def instr(self, c):
        guard = None
        if c and isinstance(c[0], tuple) and c[0][0] == "guard":
            guard, c = c[0], c[1:]
        op = c[0]
        operands = tuple(_operand(x) for x in c[1:] if x is not None)
        return X.Instr(str(op), operands, op.line, op.column, guard[1] if guard else None, bool(guard and guard[2]))

    def label(self, c):
        return X.Label(str(c[0]), c[0].line)

    def loc(self, c):
        f, line, col = (_int(str(t)) for t in c[:3])
        if len(c) > 3 and c[3] is not None:
            return _LocMark(f, line, col, str(c[3]), (_int(str(c[4])), _int(str(c[5])), _int(str(c[6]))))
        return _LocMark(f, line, col, None, None)

    def file_dir(self, c):
        return ("file", _int(str(c[0])), str(c[1])[1:-1])

    def section(self, c):
        return ("section", str(c[0]), str(c[1]))

    def header(self, c):
        return ("header", str(c[0]), [str(t) for t in c[1:]])

    def reg_range(self, c):
        return ("range", str(c[0]), _int(str(c[1])))

    def dims(self, c):
        return ("dims", tuple(_int(str(t)) if t is not None else 0 for t in c))

    def initializer(self, c):
        return ("init",)

    def dstmt(self, c):
        words: list[str] = []
        names: list[str] = []
        ranges: list[tuple[str, int]] = []
        dims: tuple[int, ...] = ()
        line = 0
        for x in c:
            if isinstance(x, Token):
                line = line or x.line
                if x.type in ("DIRECTIVE", "VISIBLE", "WEAK", "EXTERN", "INT", "FLOAT", "STRING", "OPCODE"):
                    words.append(str(x))
                else:
                    names.append(str(x))
            elif isinstance(x, tuple) and x[0] == "range":
                ranges.append((x[1], x[2]))
            elif isinstance(x, tuple) and x[0] == "dims":
                dims = x[1]
        kinds = [w for w in words if w not in (".visible", ".weak", ".extern")]
        kind = kinds[0][1:] if kinds else "other"
        return X.Decl(kind, tuple(words), tuple(names), dims, line, tuple(ranges))

    def block(self, c):
        items = tuple(x for x in c if x is not None)
        line = next((getattr(x, "line", 0) for x in items if getattr(x, "line", 0)), 0)
        return X.Scope(items, line)

    def params(self, c):
        return ("params", tuple(x for x in c if x is not None))

    def param(self, c):
        words = [str(t) for t in c[1:] if isinstance(t, Token)]
        dims = next((x[1] for x in c if isinstance(x, tuple) and x[0] == "dims"), ())
        name = words[-1]
        quals = words[:-1]
        align = 0
        if ".align" in quals:
            i = quals.index(".align")
            align = _int(quals[i + 1])
        typ = next((q for q in quals if re.fullmatch(r"\.[busf]\d+|\.pred", q)), ".b8")
        width = max(1, int(typ[2:]) // 8) if typ != ".pred" else 1
        n = 1
        for d in dims:
            n *= max(d, 1)
        return X.Param(name, typ, width * n, align or width, c[0].line)

    def perf(self, c):
        return ("perf", str(c[0])[1:], tuple(_int(str(t)) for t in c[1:] if t is not None))

    def _function(self, c, entry: bool):
        linkage = [str(t) for t in c if isinstance(t, Token) and t.type in ("VISIBLE", "WEAK", "EXTERN")]
        name_tok = next(t for t in c if isinstance(t, Token) and t.type == "NAME")
        lists = [x for x in c if isinstance(x, tuple) and x[0] == "params"]
        before = [x for x in c[:c.index(name_tok)] if isinstance(x, tuple) and x[0] == "params"]
        returns = before[0][1] if before else ()
        params = next((x[1] for x in lists if not before or x is not before[0]), ())
        directives = {x[1]: x[2] for x in c if isinstance(x, tuple) and x[0] == "perf"}
        body = next((x for x in c if isinstance(x, X.Scope)), None)
        return X.Function(str(name_tok), entry, params, returns, directives, body, name_tok.line, ".visible" in linkage)

    def entry(self, c):
        return self._function(c, True)

    def func(self, c):
        return self._function(c, False)

    def start(self, c):
        return list(c)


@functools.cache
def _parser() -> Lark:
    text = grammar_text("ptx.lark")
    # cache=True keeps the built LALR tables; the transformer builds nodes as the parser reduces
    return Lark(text, parser="lalr", lexer="contextual", transformer=_Build(), maybe_placeholders=True, cache=True)


def _strings(body: str) -> dict[str, str]:
    """The `.debug_str` section: label -> the NUL-terminated text its `.b8` bytes spell."""
    out: dict[str, str] = {}
    label = None
    data: list[int] = []
    for part in re.split(r"(\$?[A-Za-z_][\w$]*:)", body):
        part = part.strip()
        if not part or part in "{}":
            continue
        if part.endswith(":") and not part.startswith(".b8"):
            if label is not None:
                out[label] = bytes(data).split(b"\0", 1)[0].decode("utf-8", "replace")
            label, data = part[:-1], []
            continue
        data.extend(int(n) for n in re.findall(r"\d+", part.replace(".b8", "")))
    if label is not None:
        out[label] = bytes(data).split(b"\0", 1)[0].decode("utf-8", "replace")
    return out


def _attach(scope: X.Scope, state: dict) -> X.Scope:
    """Give each instruction the `.loc` in force before it, with its inlined-at chain."""
    items: list = []
    for it in scope.items:
        if isinstance(it, _LocMark):
            at = None
            if it.at is not None:
                at = state["known"].get(it.at) or X.Loc(*it.at)
            loc = X.Loc(it.file, it.line, it.col, it.function, at)
            state["known"][(it.file, it.line, it.col)] = loc
            state["loc"] = loc
            continue
        if isinstance(it, X.Scope):
            items.append(_attach(it, state))
        elif isinstance(it, X.Instr):
            loc = state["loc"]
            items.append(X.Instr(it.opcode, it.operands, it.line, it.col, it.guard, it.negated, loc) if loc else it)
        else:
            items.append(it)
    return X.Scope(tuple(items), scope.line)


def _syntax_error(file: str, exc: UnexpectedInput) -> SpecError:
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        return error("syntax", f"PTX: unexpected character {exc.char!r}", Span(file, line, col, line, col + 1))
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        return error("syntax", "PTX: the file ends inside a function body: a '}' is missing",
                     Span(file, max(line, 1), max(col, 1)))
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    want = sorted(exc.expected)
    hint = "';'" if "SEMICOLON" in want else ", ".join(want[:6])
    return error("syntax", f"PTX: unexpected {str(tok)!r}; expected {hint}",
                 Span(file, tok.line or line, tok.column or col, tok.line or line, (tok.column or col) + len(str(tok))))


@functools.cache
def _code_digest() -> bytes:
    """What a cached module depends on besides its text: the code that builds and defines it, and lark's."""
    here = Path(__file__).resolve().parent
    core = here.parent / "core"
    paths = [here / "parse.py", here / "syntax.py", core / "diagnostics.py", core / "records.py",
             grammar_path("ptx.lark"), Path(lark.__file__)]
    return cache.code_digest(paths, __version__, sys.version)


def parse_ptx(text: str, file: str) -> X.Module:
    """Parse one PTX file; raises SpecError with a located diagnostic when it does not parse. The module is kept
    in the user's cache directory keyed by the text, the name and the code (`core.cache`): a kernel checked
    again (another flag, a re-run in CI) is not parsed again."""
    if len(text) > MAX_PTX_CHARS:
        raise error("limit", f"PTX: the file has {len(text)} characters; pipecheck reads at most {MAX_PTX_CHARS}",
                    Span(file, 1, 1))
    key = _code_digest() + file.encode("utf-8", "surrogatepass") + b"\0" + text.encode("utf-8", "surrogatepass")
    return cache.kept(_CACHE, key, lambda: _parse(text, file), lambda m: isinstance(m, X.Module), keep=_KEEP)


def _parse(text: str, file: str) -> X.Module:
    try:
        items = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(file, exc) from None
    except VisitError as exc:  # a malformed number or the like inside a rule
        raise error("syntax", f"PTX: {exc.orig_exc}", Span(file, 1, 1)) from None
    version = target = ""
    address_size = 64
    functions: list[X.Function] = []
    globals_: list[X.Global] = []
    files: dict[int, str] = {}
    strings: dict[str, str] = {}
    for it in items:
        if isinstance(it, X.Function):
            functions.append(it)
        elif isinstance(it, X.Decl):
            if it.kind in ("shared", "global", "const"):
                align = 0
                if ".align" in it.words:
                    i = it.words.index(".align")
                    align = _int(it.words[i + 1])
                typ = next((w for w in it.words if re.fullmatch(r"\.[busf]\d+", w)), ".b8")
                for name in it.names:
                    globals_.append(X.Global(it.kind, name, align, typ, it.dims, ".extern" in it.words, it.line))
        elif isinstance(it, tuple) and it[0] == "file":
            files[it[1]] = it[2]
        elif isinstance(it, tuple) and it[0] == "section" and it[1] == ".debug_str":
            strings.update(_strings(it[2]))
        elif isinstance(it, tuple) and it[0] == "header":
            if it[1] == ".version":
                version = it[2][0]
            elif it[1] == ".target":
                target = it[2][0]
            elif it[1] == ".address_size":
                address_size = _int(it[2][0])
    out = []
    for f in functions:
        if f.body is not None:
            f = X.Function(f.name, f.entry, f.params, f.returns, f.directives, _attach(f.body, {"loc": None, "known": {}}),
                           f.line, f.visible)
        out.append(f)
    return X.Module(file, version, target, address_size, out, globals_, files, strings)
