"""What the model is given about a kernel besides its thread programs: the shared memory it
declares (mbarrier arrays with their counts, buffers and what storage they share), the cluster
shape and the arch. Each front end (.pipe, PTX) provides it in its own terms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..core.diagnostics import Span


@dataclass(frozen=True)
class BufferDecl:
    name: str
    dims: tuple[int, ...]
    bytes: int
    over: tuple[str, tuple[int, ...]] | None  # (buffer or mbarrier array, leading indices) it shares storage with
    span: Span
    space: str = "smem"  # smem | tmem
    labels: tuple[str, ...] = ()  # a name per element (the PTX front end names regions by address)

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass(frozen=True)
class BarrierDecl:
    name: str
    dims: tuple[int, ...]
    count: int
    noinit: bool
    span: Span
    labels: tuple[str, ...] = ()  # a name per element
    counts: tuple[int, ...] = ()  # an init count per element, where the code sets them (PTX); 0: several or none

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


class KernelShape(Protocol):
    """The declarations the model reads of a kernel, whichever front end checked it."""

    name: str
    arch: str
    cluster: tuple[int, ...]
    buffers: tuple[BufferDecl, ...]
    barriers: tuple[BarrierDecl, ...]

    @property
    def cluster_size(self) -> int: ...

    def barrier(self, name: str) -> BarrierDecl | None: ...

    def buffer(self, name: str) -> BufferDecl | None: ...
