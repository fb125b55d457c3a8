"""What the model is given about a kernel besides its thread programs: the shared memory it
declares (mbarrier arrays with their counts, buffers and what storage they share), the cluster
shape and the arch. Each front end (.pipe, PTX) provides it in its own terms.
"""
from __future__ import annotations


from typing import Protocol

from ..core.diagnostics import Span
from ..core.records import record


# the kernel choice of cluster launch control (`clc N`, or the PTX front end's 0..2): how many clusters' work a
# cluster takes over
CLC_CHOICE = "clc"

@record
class BufferDecl:
    name: str
    dims: tuple[int, ...]
    bytes: int
    over: tuple[str, tuple[int, ...]] | None  # (buffer or mbarrier array, leading indices) it shares storage with
    span: Span
    space: str = "smem"  # smem | tmem
    labels: tuple[str, ...] = ()  # a name per element (the PTX front end names regions by address)
    # per element: whether copies land in it (PTX: a TMA load's or try_cancel's destination); () means every element.
    # Reading an element nothing has written is a stale read only where copies land: the PTX front end does not
    # follow every write to shared memory (tcgen05.alloc's TMEM address, a store it does not read), so elsewhere
    # "nothing written yet" means only "nothing the model follows"
    landed: tuple[bool, ...] = ()

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@record
class BarrierDecl:
    name: str
    dims: tuple[int, ...]
    count: int
    noinit: bool
    span: Span
    labels: tuple[str, ...] = ()  # a name per element
    counts: tuple[int, ...] = ()  # an init count per element, where the code sets them (PTX); 0: several or none
    per_cta: tuple[int, ...] = ()  # the init count in each CTA of the cluster, where it depends on the CTA

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def count_in(self, cta: int) -> int:
        """The init count of this array's elements in CTA `cta` (`count` is CTA 0's)."""
        return self.per_cta[cta] if self.per_cta else self.count


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
