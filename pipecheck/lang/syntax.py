"""Text to syntax tree with lark: the grammar in grammars/pipe.lark, with source positions.

`parse` is pure. Syntax errors become diagnostics with file:line:col and a message in the
language's own words. Only `lang.parse` imports this module, and only when its cache of
parsed files misses: a start-up with every file cached never imports lark.
"""
from __future__ import annotations

import functools

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..core.grammars import grammar_text
from ..core.diagnostics import Note, Span, SpecError, error, source_lines
from ..core.words import did_you_mean
from . import ast as A
from .limits import MAX_NESTING


class _LineStart:
    """Post-lexer: an `expect_tx` at the start of a line is a statement, never an `arrive` option."""

    always_accept = ()

    def process(self, stream):
        prev = None
        for tok in stream:
            if tok.type == "EXPECT_TX" and prev is not None and tok.line > (prev.end_line or prev.line):
                yield Token.new_borrow_pos("_SEP", "", tok)
            yield tok
            prev = tok


@functools.cache
def _parser() -> Lark:
    # cache=True keeps the built LALR tables in the temp directory: start-up matters for pre-commit use
    return Lark(grammar_text("pipe.lark"), parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True,
                postlex=_LineStart())


def _span(file: str, meta) -> Span:
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(file: str, tok: Token) -> Span:
    return Span(file, tok.line or 0, tok.column or 0, tok.end_line or 0, tok.end_column or 0)


_ROLE_SHAPES = ("thread", "warp", "warpgroup", "threads", "warps", "warpgroups")


def _int(text: str) -> int:
    text = text.replace("_", "")
    if text.startswith(("0x", "0X")):
        return int(text, 16)
    if text.startswith(("0b", "0B")):
        return int(text, 2)
    return int(text)


class _Build(Transformer):
    """Builds AST nodes; every rule keeps its span."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def s(self, meta) -> Span:
        return _span(self.file, meta)

    # --- expressions
    @v_args(meta=True)
    def number(self, meta, c):
        value = _int(c[0])
        if c[1] is not None:
            value *= {"KiB": 1024, "MiB": 1024 * 1024}[str(c[1])]
        return A.Num(value, self.s(meta))

    @v_args(meta=True)
    def true(self, meta, c):
        return A.Bool(True, self.s(meta))

    @v_args(meta=True)
    def false(self, meta, c):
        return A.Bool(False, self.s(meta))

    @v_args(meta=True)
    def name(self, meta, c):
        return A.Name(str(c[0]), self.s(meta))

    @v_args(meta=True)
    def call(self, meta, c):
        args = tuple(a for a in c[1:] if a is not None)
        return A.Call(str(c[0]), args, self.s(meta))

    @v_args(meta=True)
    def attr(self, meta, c):
        return A.Attr(c[0], str(c[1]), self.s(meta))

    @v_args(meta=True)
    def index(self, meta, c):
        return A.Index(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def neg(self, meta, c):
        return A.Unary("-", c[0], self.s(meta))

    @v_args(meta=True)
    def not_(self, meta, c):
        return A.Unary("!", c[0], self.s(meta))

    def _bin(self, meta, op, l, r):
        return A.Binary(op, l, r, self.s(meta))

    @v_args(meta=True)
    def arith(self, meta, c):
        return self._bin(meta, str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def shift(self, meta, c):
        return self._bin(meta, str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def compare(self, meta, c):
        return self._bin(meta, str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def bit_or(self, meta, c):
        return self._bin(meta, "|", c[0], c[1])

    @v_args(meta=True)
    def bit_xor(self, meta, c):
        return self._bin(meta, "^", c[0], c[1])

    @v_args(meta=True)
    def bit_and(self, meta, c):
        return self._bin(meta, "&", c[0], c[1])

    @v_args(meta=True)
    def and_(self, meta, c):
        return self._bin(meta, "&&", c[0], c[1])

    @v_args(meta=True)
    def or_(self, meta, c):
        return self._bin(meta, "||", c[0], c[1])

    @v_args(meta=True)
    def ternary(self, meta, c):
        return A.Ternary(c[0], c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def ref(self, meta, c):
        return A.Ref(str(c[0]), tuple(c[1:]), self.s(meta))

    # --- statements
    def block(self, c):
        return tuple(x for x in c if x is not None and not isinstance(x, Token))

    def stmt(self, c):  # a lone ';'
        return None

    stmt_body = stmt

    @v_args(meta=True)
    def let_stmt(self, meta, c):
        return A.Let(str(c[0]), c[1], self.s(meta))

    def choose_range(self, c):
        return (c[0], c[1])

    @v_args(meta=True)
    def choose_stmt(self, meta, c):
        lo, hi = c[1] if c[1] is not None else (None, None)
        return A.Choose(str(c[0]), lo, hi, self.s(meta))

    @v_args(meta=True)
    def ring_stmt(self, meta, c):
        return A.RingDecl(str(c[0]), c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def advance_stmt(self, meta, c):
        return A.Advance(str(c[0]), self.s(meta))

    @v_args(meta=True)
    def for_stmt(self, meta, c):
        return A.For(str(c[0]), c[1], c[2], c[3], self.s(meta))

    @v_args(meta=True)
    def if_stmt(self, meta, c):
        other = c[2]
        if other is None:
            other = ()
        elif isinstance(other, A.If):
            other = (other,)
        return A.If(c[0], c[1], other, self.s(meta))

    @v_args(meta=True)
    def wait_stmt(self, meta, c):
        return A.Wait(c[0], c[1], c[2], self.s(meta))

    def opt_count(self, c):
        return ("count", c[0])

    def opt_expect_tx(self, c):
        return ("expect_tx", c[0])

    def opt_on_cta(self, c):
        return ("cta", c[0])

    def opt_bytes(self, c):
        return ("bytes", c[0])

    def opt_map(self, c):
        return ("map", str(c[0]))

    def opt_barrier(self, c):
        return ("barrier", c[0])

    def opt_multicast(self, c):
        return ("multicast", c[0])

    def opt_cta_group(self, c):
        return ("cta_group", c[0])

    def opt_tile(self, c):
        return ("tile", c[0])

    def on_cta(self, c):
        return c[0]

    def _opts(self, meta, opts, allowed: tuple[str, ...]) -> dict:
        out: dict = {}
        for key, value in opts:
            if key in out:
                raise error("syntax", f"'{key}' is given twice", self.s(meta))
            out[key] = value
        return {k: out.get(k) for k in allowed}

    @v_args(meta=True)
    def arrive_stmt(self, meta, c):
        o = self._opts(meta, c[1:], ("count", "expect_tx", "cta"))
        return A.Arrive(c[0], o["count"], o["expect_tx"], o["cta"], self.s(meta))

    @v_args(meta=True)
    def expect_tx_stmt(self, meta, c):
        return A.ExpectTx(c[0], c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def complete_tx_stmt(self, meta, c):
        return A.CompleteTx(c[0], c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def arrive_drop_stmt(self, meta, c):
        return A.ArriveDrop(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def tma_load_stmt(self, meta, c):
        o = self._opts(meta, c[2:], ("bytes", "map", "barrier", "multicast", "cta", "cta_group"))
        return A.TmaLoad(c[0], c[1], o["bytes"], o["map"], o["barrier"], o["multicast"], o["cta"], o["cta_group"],
                         self.s(meta))

    @v_args(meta=True)
    def tma_store_stmt(self, meta, c):
        o = self._opts(meta, c[1:], ("tile", "bytes", "map", "barrier"))
        return A.TmaStore(c[0], o["tile"], o["bytes"], o["map"], o["barrier"], self.s(meta))

    @v_args(meta=True)
    def read_stmt(self, meta, c):
        return A.Read(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def write_stmt(self, meta, c):
        return A.Write(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def operand(self, meta, c):
        return A.Operand(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def mma_async_stmt(self, meta, c):
        return A.MmaAsync(tuple(x for x in c[:-2]), c[-2], c[-1], self.s(meta))

    @v_args(meta=True)
    def cp_async_stmt(self, meta, c):
        return A.CpAsync(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def mma_wait_stmt(self, meta, c):
        return A.MmaWait(c[0], self.s(meta))

    @v_args(meta=True)
    def mma_commit_stmt(self, meta, c):
        return A.MmaCommit(c[0], c[1], self.s(meta))

    @v_args(meta=True)
    def cp_async_arrive_stmt(self, meta, c):
        return A.CpAsyncArrive(c[0], self.s(meta))

    @v_args(meta=True)
    def commit_group_stmt(self, meta, c):
        return A.CommitGroup(self.s(meta))

    @v_args(meta=True)
    def wait_group_stmt(self, meta, c):
        return A.WaitGroup(c[0], False, self.s(meta))

    @v_args(meta=True)
    def wait_group_read_stmt(self, meta, c):
        return A.WaitGroup(c[0], True, self.s(meta))

    @v_args(meta=True)
    def fence_proxy_async_stmt(self, meta, c):
        return A.FenceProxyAsync(self.s(meta))

    @v_args(meta=True)
    def fence_barrier_init_stmt(self, meta, c):
        return A.FenceBarrierInit(self.s(meta))

    @v_args(meta=True)
    def setmaxnreg_stmt(self, meta, c):
        return A.SetMaxNReg(str(c[0]), c[1], self.s(meta))

    @v_args(meta=True)
    def tcgen05_before_stmt(self, meta, c):
        return A.Tcgen05("before_thread_sync", self.s(meta))

    @v_args(meta=True)
    def tcgen05_after_stmt(self, meta, c):
        return A.Tcgen05("after_thread_sync", self.s(meta))

    @v_args(meta=True)
    def tmem_alloc_stmt(self, meta, c):
        return A.Tcgen05("alloc", self.s(meta))

    @v_args(meta=True)
    def tmem_dealloc_stmt(self, meta, c):
        return A.Tcgen05("dealloc", self.s(meta))

    @v_args(meta=True)
    def tmem_relinquish_stmt(self, meta, c):
        return A.Tcgen05("relinquish", self.s(meta))

    @v_args(meta=True)
    def syncwarp_stmt(self, meta, c):
        return A.SyncWarp(c[0], self.s(meta))

    @v_args(meta=True)
    def syncthreads_stmt(self, meta, c):
        return A.SyncThreads(self.s(meta))

    @v_args(meta=True)
    def cluster_sync_stmt(self, meta, c):
        return A.ClusterSync(self.s(meta))

    @v_args(meta=True)
    def bar_sync_stmt(self, meta, c):
        return A.BarSync(c[0], c[1], True, self.s(meta))

    @v_args(meta=True)
    def bar_arrive_stmt(self, meta, c):
        return A.BarSync(c[0], c[1], False, self.s(meta))

    @v_args(meta=True)
    def init_stmt(self, meta, c):
        return A.Init(c[0], c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def inval_stmt(self, meta, c):
        return A.Inval(c[0], self.s(meta))

    @v_args(meta=True)
    def exit_stmt(self, meta, c):
        return A.Exit(self.s(meta))

    @v_args(meta=True)
    def break_stmt(self, meta, c):
        return A.Break(self.s(meta))

    def try_cancel_mc(self, c):
        return True

    @v_args(meta=True)
    def try_cancel_stmt(self, meta, c):
        return A.TryCancel(c[0], c[1], c[2], bool(c[3]), self.s(meta))

    @v_args(meta=True)
    def query_cancel_stmt(self, meta, c):
        return A.QueryCancel(str(c[0]), c[1], c[2], self.s(meta))

    @v_args(meta=True)
    def clc(self, meta, c):
        return A.Clc(c[0], self.s(meta))

    def proc_name(self, c):
        return ".".join(str(x) for x in c)

    @v_args(meta=True)
    def call_stmt(self, meta, c):
        return A.CallStmt(c[0], tuple(a for a in c[1:] if a is not None), self.s(meta))

    # --- declarations
    def dims(self, c):
        return tuple(c)

    @v_args(meta=True)
    def arch(self, meta, c):
        return A.Arch(str(c[0]), self.s(meta))

    @v_args(meta=True)
    def param(self, meta, c):
        return A.Param(str(c[0]), c[1], c[2], c[3], self.s(meta))

    @v_args(meta=True)
    def const_decl(self, meta, c):
        return A.Const(str(c[0]), c[1], self.s(meta))

    def alias(self, c):
        return c[0]

    @v_args(meta=True)
    def smem(self, meta, c):
        return A.Smem(str(c[0]), c[1], c[2], c[3], "smem", self.s(meta))

    @v_args(meta=True)
    def tmem(self, meta, c):
        return A.Smem(str(c[0]), c[1], c[2], None, "tmem", self.s(meta))

    def mbar_opt(self, c):
        return str(c[0])

    @v_args(meta=True)
    def mbarrier(self, meta, c):
        opts = [str(x) for x in c[3:]]
        return A.MBarrier(str(c[0]), c[1], c[2], "noinit" in opts, self.s(meta))

    @v_args(meta=True)
    def cluster(self, meta, c):
        return A.Cluster(tuple(c), self.s(meta))

    @v_args(meta=True)
    def role(self, meta, c):
        name, dims, shape, size, body = c
        shape_s = str(shape)
        if shape_s not in _ROLE_SHAPES:
            raise error(
                "syntax",
                f"'{shape_s}' is not a role shape; write one of: thread, warp, warpgroup, threads N, warps N, warpgroups N",
                _tspan(self.file, shape),
            )
        if shape_s in ("threads", "warps", "warpgroups") and size is None:
            raise error("syntax", f"'{shape_s}' needs a count, e.g. `{shape_s} 2`", _tspan(self.file, shape))
        if shape_s in ("thread", "warp", "warpgroup") and size is not None:
            raise error("syntax", f"'{shape_s}' takes no count; write `{shape_s}s N` for several", _tspan(self.file, shape))
        return A.Role(str(name), dims, shape_s, size, body, self.s(meta))

    @v_args(meta=True)
    def kchoose(self, meta, c):
        lo, hi = c[2] if c[2] is not None else (None, None)
        return A.KChoose(str(c[0]), c[1], lo, hi, self.s(meta))

    def tm_list(self, c):
        return tuple(c)

    @v_args(meta=True)
    def tm_field(self, meta, c):
        return A.TensorMapField(str(c[0]), c[1], self.s(meta))

    @v_args(meta=True)
    def tensormap(self, meta, c):
        return A.TensorMap(str(c[0]), tuple(c[1:]), self.s(meta))

    @v_args(meta=True)
    def proc_def(self, meta, c):
        params = tuple(str(p) for p in c[1:-1] if p is not None)
        return A.Proc(str(c[0]), params, c[-1], self.s(meta))

    @v_args(meta=True)
    def import_stmt(self, meta, c):
        return A.Import(str(c[0])[1:-1], self.s(meta))

    @v_args(meta=True)
    def kernel(self, meta, c):
        items = tuple(x for x in c[1:] if x is not None and not isinstance(x, Token))
        return A.Kernel(str(c[0]), items, self.s(meta))

    def start(self, c):
        return c


_FRIENDLY = {
    "RBRACE": "'}'", "LBRACE": "'{'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "NAME": "a name", "INT": "a number", "STRING": "a quoted path", "SEMICOLON": "';'",
    "COMMA": "','", "EQUAL": "'='", "DOT": "'.'", "COLON": "':'", "QMARK": "'?'",
    "CMP_OP": "a comparison", "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/' or '%'", "UNIT": "KiB or MiB",
}


def _describe_expected(expected: set[str]) -> str:
    names: list[str] = []
    parser = _parser()
    for t in sorted(expected):
        if t in _FRIENDLY:
            names.append(_FRIENDLY[t])
            continue
        try:
            pat = parser.get_terminal(t).pattern
            names.append(f"'{pat.value}'" if pat.type == "str" else t.lower())
        except KeyError:
            names.append(t.lower())
    names = sorted(set(names))
    if len(names) > 8:
        return ", ".join(names[:8]) + ", ..."
    return ", ".join(names)


@functools.cache
def keywords() -> tuple[str, ...]:
    """The language's keywords (`wait`, `advance`, `expect_tx`, ...): the grammar's word-like literals."""
    words = {t.pattern.value for t in _parser().terminals if t.pattern.type == "str"}
    return tuple(sorted(w for w in words if w.isidentifier()))


def _expected_keywords(expected: set[str]) -> list[str]:
    parser = _parser()
    out = []
    for t in expected:
        try:
            pat = parser.get_terminal(t).pattern
        except KeyError:
            continue
        if pat.type == "str" and pat.value.isidentifier():
            out.append(pat.value)
    return out


def _syntax_error(file: str, exc: UnexpectedInput, text: str = "") -> SpecError:
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        ch = exc.char
        msg = f"unexpected character {ch!r}"
        return error("syntax", msg, Span(file, line, col, line, col + 1))
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        brace = _unclosed_brace(text, file)
        if brace is not None:
            return error("syntax", "this '{' is never closed: the file ends inside its block (a '}' is missing)", brace)
        return error("syntax", "the file ends inside a block: a '}' is missing", Span(file, max(line, 1), max(col, 1)))
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    notes = []
    brace = _unclosed_brace(text, file)
    if brace is not None and (brace.line, brace.col) < (tok.line or 0, tok.column or 0):
        if str(tok) in _OUTER_KEYWORDS:  # `role b ...` inside role a's body: a's '}' is missing
            return error("syntax", f"this '{{' is never closed: '{tok}' on line {tok.line} cannot stand inside its "
                         "block (a '}' is missing)", brace, Note(f"'{tok}' starts a new item here", _tspan(file, tok)))
        notes.append(Note("is a '}' missing? no '}' at the indentation of this line closes this '{'", brace))
    prev = _previous_name(exc)
    if prev is not None and set(exc.expected) <= {"LPAR", "DOT"} and str(prev) in keywords():
        # a keyword where no statement can start with it (`else` after a block that is not an if's)
        return error("syntax", f"unexpected '{prev}' here", _tspan(file, prev), *notes)
    if prev is not None and set(exc.expected) <= {"LPAR", "DOT"}:
        # a word at the start of a statement that is no keyword: the parser read it as a procedure call
        # and stumbles on the token after it; the word is the mistake
        hint = did_you_mean(str(prev), keywords())
        what = (f"'{prev}' is not a statement keyword{hint}" if hint else
                f"'{prev}' is not a statement keyword: a statement starts with one (docs/language.md) or calls a "
                f"procedure, `{prev}(...)`")
        return error("syntax", what, _tspan(file, prev), *notes)
    exp = _describe_expected(set(exc.expected))
    text_ = str(tok)
    msg = f"unexpected {text_!r}; expected {exp}"
    if tok.type == "NAME":
        hint = "" if text_ in keywords() else did_you_mean(text_, _expected_keywords(set(exc.expected)))
        if hint:
            msg = f"unexpected {text_!r}{hint}"
        elif "'}'" in exp:
            msg += f" (is '{text_}' a statement keyword? see docs/language.md)"
    return error("syntax", msg, _tspan(file, tok), *notes)


# what starts a kernel item or a file item, never a statement: seen inside a block, an earlier '}' is missing
_OUTER_KEYWORDS = frozenset({"import", "kernel", "proc", "arch", "param", "const", "smem", "tmem", "mbarrier",
                             "cluster", "role", "tensormap"})


def _previous_name(exc: UnexpectedToken) -> Token | None:
    """The NAME token the parser read just before the failing one, if that is what it read."""
    try:
        stack = exc.interactive_parser.parser_state.value_stack  # type: ignore[union-attr]
    except AttributeError:
        return None
    last = stack[-1] if stack else None
    return last if isinstance(last, Token) and last.type == "NAME" else None


def _unclosed_brace(text: str, file: str) -> Span | None:
    """The '{' most likely missing its '}': the first whose closing brace sits at another indentation
    than the line that opened it (the '}' meant for an outer block closed it), else the innermost one
    left open at the end. None when every '{' is closed."""
    stack: list[tuple[int, int, int]] = []  # (line, col, indentation of the opening line)
    suspect: tuple[int, int] | None = None
    for lineno, raw in enumerate(source_lines(text), 1):
        indent = len(raw) - len(raw.lstrip(" \t"))
        in_string = False
        for i, ch in enumerate(raw):
            if in_string:
                in_string = ch != '"'
            elif ch == '"':
                in_string = True
            elif ch == "#" or raw.startswith("//", i):
                break
            elif ch == "{":
                stack.append((lineno, i + 1, indent))
            elif ch == "}" and stack:
                oline, ocol, oindent = stack.pop()
                first_on_line = i == indent
                if suspect is None and first_on_line and oline != lineno and oindent != indent:
                    suspect = (oline, ocol)
    if not stack:
        return None
    line, col = suspect if suspect is not None else stack[-1][:2]
    return Span(file, line, col, line, col + 1)


def _check_nesting(tree: Tree, file: str) -> None:
    """Every later stage walks the tree recursively: reject a tree deeper than MAX_NESTING here, where it
    can still be located, instead of letting a RecursionError out of some later stage."""
    stack: list[tuple[Tree, int, Span | None]] = [(tree, 0, None)]
    while stack:
        node, depth, where = stack.pop()
        if not node.meta.empty:
            where = _span(file, node.meta)
        if depth > MAX_NESTING:
            raise error("limit", f"expressions and blocks nest more than {MAX_NESTING} levels deep here; "
                                 "split the expression with `let`/`const` or flatten the blocks", where)
        stack.extend((c, depth + 1, where) for c in node.children if isinstance(c, Tree))


def parse(text: str, file: str) -> A.SpecFile:
    """Parse one file's text into a `SpecFile`; raises SpecError with diagnostics."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(file, exc, text) from None
    _check_nesting(tree, file)
    try:
        items = _Build(file).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, SpecError):
            raise exc.orig_exc from None
        raise
    imports = tuple(x for x in items if isinstance(x, A.Import))
    kernels = tuple(x for x in items if isinstance(x, A.Kernel))
    procs = tuple(x for x in items if isinstance(x, A.Proc))
    return A.SpecFile(file, imports, kernels, procs, Span(file, 1, 1))
