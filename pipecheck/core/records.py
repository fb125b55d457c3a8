"""`@record`: `@dataclass(frozen=True)` whose generated methods are compiled once, not at every start.

dataclasses writes the source of each class's `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` and compiles it at import: for the syntax tree and the IR that
was a fifth of the start-up of a `.pipe` run. `record` lets dataclasses collect the fields (no
code generated), writes the same six methods (the semantics of CPython 3.11's dataclasses:
`__eq__` compares the `compare` fields as a tuple when the classes are the same, `__hash__`
hashes the `hash` fields, `__repr__` guards recursion, assigning or deleting raises
`FrozenInstanceError`) and keeps the compiled code in the user's cache directory, keyed by the
source text and the Python version. An unreadable or unwritable cache only costs the compile.

Only plain frozen records: no `__init__`/`__eq__`/`__hash__`/`__repr__`/`__setattr__` of their
own, no `InitVar`, no keyword-only fields, no inheritance from another dataclass (TypeError).
"""
from __future__ import annotations

import dataclasses
import hashlib
import marshal
import reprlib
import sys
import types
from dataclasses import MISSING, FrozenInstanceError
from typing import TypeVar, dataclass_transform

from . import cache

T = TypeVar("T")
_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


class _Factory:  # the default of a parameter whose field has a default_factory (dataclasses' _HAS_DEFAULT_FACTORY)
    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _compiled(source: str) -> types.CodeType:
    """The code of `source`: from the cache when there, else compiled and stored (written aside, then renamed)."""
    key = hashlib.sha256(f"{sys.version}\0{source}".encode()).hexdigest()[:40]
    kind = f"records-{sys.implementation.cache_tag}"
    data = cache.read(kind, key)
    if data is not None:
        try:
            code = marshal.loads(data)
            if isinstance(code, types.CodeType):
                return code
        except (ValueError, EOFError, TypeError):
            pass
    code = compile(source, "<pipecheck.core.records>", "exec")
    cache.write(kind, key, marshal.dumps(code))
    return code


def _source(fields: tuple[dataclasses.Field, ...], post_init: bool) -> str:
    params, body = [], []
    seen_default = False
    for f in fields:
        if f.init:
            if f.default is not MISSING:
                params.append(f"{f.name}=_d_{f.name}")
            elif f.default_factory is not MISSING:
                params.append(f"{f.name}=_FACTORY")
            elif seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            else:
                params.append(f.name)
            seen_default = seen_default or f.default is not MISSING or f.default_factory is not MISSING
            value = f"_f_{f.name}() if {f.name} is _FACTORY else {f.name}" if f.default_factory is not MISSING else f.name
        elif f.default_factory is not MISSING:
            value = f"_f_{f.name}()"
        elif f.default is not MISSING:
            value = f"_d_{f.name}"
        else:
            continue
        body.append(f"    _setattr(self, {f.name!r}, {value})")
    if post_init:
        body.append("    self.__post_init__()")
    compared = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    names = tuple(f.name for f in fields)

    def tup(prefix: str, names: list[str]) -> str:
        return "(" + "".join(f"{prefix}.{n}," for n in names) + ")"

    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    return "\n".join([
        f"def __init__(self, {', '.join(params)}):" if params else "def __init__(self):",
        *(body or ["    pass"]),
        "def __repr__(self):",
        f"    return f\"{{self.__class__.__qualname__}}({shown})\"",
        "def __eq__(self, other):",
        "    if other.__class__ is self.__class__:",
        f"        return {tup('self', compared)} == {tup('other', compared)}",
        "    return NotImplemented",
        "def __hash__(self):",
        f"    return hash({tup('self', hashed)})",
        "def __setattr__(self, name, value):",
        f"    if type(self) is _cls or name in {names!r}:",
        "        raise _Frozen(f\"cannot assign to field {name!r}\")",
        "    super(_cls, self).__setattr__(name, value)",
        "def __delattr__(self, name):",
        f"    if type(self) is _cls or name in {names!r}:",
        "        raise _Frozen(f\"cannot delete field {name!r}\")",
        "    super(_cls, self).__delattr__(name)",
        "",
    ])


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` for a plain record, with its methods compiled once (module docstring)."""
    own = [n for n in _OWN if n in cls.__dict__ and not (n == "__hash__" and cls.__dict__[n] is None)]
    if own or any(dataclasses.is_dataclass(b) for b in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: @record is for plain records; use @dataclass(frozen=True)")
    doc = cls.__doc__
    cls.__doc__ = doc or cls.__name__  # else dataclasses computes one from the signature (inspect: slow)
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # the fields only: no code generated
    cls.__doc__ = doc
    fields = dataclasses.fields(cls)
    if len(fields) != len(cls.__dataclass_fields__) or any(f.kw_only for f in fields):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__qualname__}: @record takes no ClassVar/InitVar or keyword-only fields")
    ns: dict = {"__name__": cls.__module__, "_setattr": object.__setattr__, "_FACTORY": _FACTORY,
                "_Frozen": FrozenInstanceError, "_cls": cls}
    for f in fields:
        ns[f"_d_{f.name}"] = f.default
        ns[f"_f_{f.name}"] = f.default_factory
    exec(_compiled(_source(fields, hasattr(cls, "__post_init__"))), ns)
    for name in _OWN:
        fn = ns[name]
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, reprlib.recursive_repr()(fn) if name == "__repr__" else fn)
    return cls
