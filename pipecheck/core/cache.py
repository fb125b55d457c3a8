"""The user's cache directory for what pipecheck computes once and reads back at the next start.

`$XDG_CACHE_HOME/pipecheck/KIND` (else `~/.cache/pipecheck/KIND`), made with mode 0700 and
used only when the user owns it and no one else may write it (entries are pickles); none at all
with `PIPECHECK_NO_CACHE` set. Entries are named by a key the caller derives from
everything the content depends on, so a stale entry is never read, only left behind. Writes
go to a temporary file renamed into place (two processes writing the same entry both write
the same bytes). A directory past its `keep` entries loses its least recently used half at the
next write (a read marks an entry used). Every failure is silent: an unreadable or unwritable cache costs the time
it would have saved, never a run.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def cache_dir(kind: str) -> Path | None:
    """The directory for entries of KIND, or None where it cannot be made or is not the user's."""
    if os.environ.get("PIPECHECK_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec says to use the default then
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return _made(base, kind)


@functools.cache
def _made(base: str, kind: str) -> Path | None:
    path = Path(base) / "pipecheck" / kind
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
            return None  # entries are pickles: read them only from a directory no one else can write
    except OSError:
        return None
    return path


def read(kind: str, key: str, touch: bool = False) -> bytes | None:
    """The bytes stored under KEY, or None; `touch` marks the entry used (for `write`'s pruning)."""
    where = cache_dir(kind)
    if where is None:
        return None
    try:
        data = (where / key).read_bytes()
    except OSError:
        return None
    if touch:
        try:
            os.utime(where / key)
        except OSError:
            pass
    return data


def write(kind: str, key: str, data: bytes, keep: int = 4096) -> None:
    """Store DATA under KEY (written aside, then renamed); a failure leaves no entry."""
    where = cache_dir(kind)
    if where is None:
        return
    tmp = where / f"{key}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, where / key)
    except OSError:
        _remove(tmp)
        return
    _prune(where, keep)


def code_digest(paths: Iterable[Path], *extra: str) -> bytes:
    """A digest of the files (their bytes, a missing one as missing) and the strings: what a product of that code
    depends on, for a key."""
    h = hashlib.sha256("\0".join(extra).encode())
    for p in paths:
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"\0missing\0")
        h.update(b"\0" + p.name.encode() + b"\0")
    return h.digest()


def kept(kind: str, key: bytes, make: Callable[[], T], fits: Callable[[object], bool], keep: int = 4096) -> T:
    """The object stored under KEY when there is one that `fits`, else `make()` stored there (pickled). What
    `make` raises is raised and nothing is stored; an entry that does not load is made afresh."""
    name = hashlib.sha256(key).hexdigest()[:40]
    data = read(kind, name, touch=True)
    if data is not None:
        try:
            obj = pickle.loads(data)
        except Exception:  # a damaged or foreign entry: made afresh
            obj = None
        if obj is not None and fits(obj):
            return obj
    made = make()
    try:
        blob = pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
        return made
    write(kind, name, blob, keep)
    return made


def _prune(where: Path, keep: int) -> None:
    """Past `keep` entries, remove the least recently used half (by modification time, then name)."""
    try:
        with os.scandir(where) as it:
            entries = [e for e in it if e.is_file(follow_symlinks=False)]
        if len(entries) <= keep:
            return
        dated = sorted(((e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in entries))
    except OSError:
        return
    for _, name in dated[:len(dated) - keep // 2]:
        _remove(where / name)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
