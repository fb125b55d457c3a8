"""Where every barrier and buffer element lives: flat ids per CTA, names, and shared storage.

Buffers declared `over` another buffer or an mbarrier array share its storage; two
elements overlap when they cover a common storage cell, so a write to one is a hazard
for readers of the other.
"""
from __future__ import annotations

import itertools

from .kernel import KernelShape


def _index_name(name: str, dims: tuple[int, ...], off: int) -> str:
    idx = []
    rem = off
    for dim in reversed(dims):
        idx.append(rem % dim)
        rem //= dim
    return name + "".join(f"[{i}]" for i in reversed(idx))


class Layout:
    def __init__(self, kernel: KernelShape):
        self.ncta = kernel.cluster_size
        self.bar_base: dict[str, tuple[int, tuple[int, ...]]] = {}
        n = 0
        for b in kernel.barriers:
            self.bar_base[b.name] = (n, b.dims)
            n += b.size
        self.nbar = n
        self.buf_base: dict[str, tuple[int, tuple[int, ...]]] = {}
        n = 0
        for b in kernel.buffers:
            self.buf_base[b.name] = (n, b.dims)
            n += b.size
        self.nbuf = n
        self.bar_names = [self._name(kernel.barriers, gid, self.nbar) for gid in range(self.nbar * self.ncta)]
        self.buf_names = [self._name(kernel.buffers, gid, self.nbuf) for gid in range(self.nbuf * self.ncta)]
        self.space = [kernel.buffers[self._decl_index(kernel.buffers, gid % self.nbuf)].space
                      for gid in range(self.nbuf * self.ncta)] if self.nbuf else []
        self.landed = [self._landed(kernel.buffers, gid % self.nbuf) for gid in range(self.nbuf * self.ncta)] \
            if self.nbuf else []
        self.overlaps, self.bar_overlaps = self._storage(kernel)

    def _landed(self, decls, local: int) -> bool:
        d = decls[self._decl_index(decls, local)]
        k = local - self.buf_base[d.name][0]
        return not d.landed or d.landed[k]

    def ctas(self, mask: int) -> list[int]:
        """The CTAs of the cluster a multicast mask names."""
        return [k for k in range(self.ncta) if mask >> k & 1]

    def bar_in(self, cta: int, gid: int) -> int:
        """The barrier at `gid`'s place in CTA `cta` (multicast and remote operations name it by index)."""
        return cta * self.nbar + gid % self.nbar

    def buf_in(self, cta: int, buf: int) -> int:
        """The buffer at `buf`'s place in CTA `cta`."""
        return cta * self.nbuf + buf % self.nbuf

    def load_targets(self, buf: int, bar: int, mask: int | None) -> list[tuple[int, int]]:
        """Where a TMA load lands and completes: (buffer, barrier) per landing. Without a multicast mask the
        buffer and barrier as resolved (the issuer's, CTA r's with `on cta r`, the pair leader's barrier with
        `cta_group 2`); with one, the same places in each CTA of the mask."""
        if mask is None:
            return [(buf, bar)]
        return [(self.buf_in(k, buf), self.bar_in(k, bar)) for k in self.ctas(mask)]

    def _decl_index(self, decls, off: int) -> int:
        for i, d in enumerate(decls):
            if off < d.size:
                return i
            off -= d.size
        return -1

    def _name(self, decls, gid: int, per: int) -> str:
        cta, off = divmod(gid, per)
        for d in decls:
            if off < d.size:
                labels = getattr(d, "labels", ())
                name = labels[off] if off < len(labels) else _index_name(d.name, d.dims, off)
                return f"cta{cta}.{name}" if self.ncta > 1 else name
            off -= d.size
        return "?"

    def _cells(self, kernel: KernelShape, name: str, flat: int, memo: dict) -> frozenset:
        """The storage cells (root buffer or barrier element) one buffer element occupies."""
        key = (name, flat)
        if key in memo:
            return memo[key]
        buf = kernel.buffer(name)
        if buf is None:  # an mbarrier element is its own storage
            memo[key] = frozenset({("bar", name, flat)})
            return memo[key]
        if buf.over is None:
            memo[key] = frozenset({("buf", name, flat)})
            return memo[key]
        target, lead = buf.over
        tdims = kernel.buffer(target).dims if kernel.buffer(target) else kernel.barrier(target).dims
        rest = tdims[len(lead):]
        elements: list[tuple[int, ...]]
        if rest == buf.dims:  # element-wise: alias[i] over target[lead..., i]
            own = []
            rem = flat
            for d in reversed(buf.dims):
                own.append(rem % d)
                rem //= d
            elements = [lead + tuple(reversed(own))]
        else:  # the whole alias covers every remaining element
            elements = [lead + tail for tail in itertools.product(*[range(d) for d in rest])]
        cells: set = set()
        for e in elements:
            tflat = 0
            for i, d in zip(e, tdims):
                tflat = tflat * d + i
            cells |= self._cells(kernel, target, tflat, memo)
        memo[key] = frozenset(cells)
        return memo[key]

    def _storage(self, kernel: KernelShape) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        memo: dict = {}
        cells: list[frozenset] = []
        for b in kernel.buffers:
            for flat in range(b.size):
                cells.append(self._cells(kernel, b.name, flat, memo))
        overlaps: list[tuple[int, ...]] = []
        bar_overlaps: list[tuple[int, ...]] = []
        for cta in range(self.ncta):
            for off, mine in enumerate(cells):
                others = tuple(cta * self.nbuf + j for j, theirs in enumerate(cells) if j != off and mine & theirs)
                overlaps.append(others)
                bars = []
                for kind, name, flat in mine:
                    if kind == "bar":
                        bars.append(cta * self.nbar + self.bar_base[name][0] + flat)
                bar_overlaps.append(tuple(bars))
        return overlaps, bar_overlaps
