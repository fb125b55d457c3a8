"""Tensor map declarations: element sizes and the bytes one TMA box delivers.

The box is delivered whole, out-of-bounds elements included (SEMANTICS 3, H200 oob 1-3).
"""
from __future__ import annotations

from typing import Mapping

ELEMENT_BYTES: Mapping[str, int] = {
    "u8": 1, "uint8": 1, "i8": 1, "int8": 1, "fp8": 1, "e4m3": 1, "e5m2": 1,
    "u16": 2, "uint16": 2, "f16": 2, "fp16": 2, "float16": 2, "bf16": 2, "bfloat16": 2,
    "u32": 4, "uint32": 4, "i32": 4, "int32": 4, "f32": 4, "fp32": 4, "float32": 4, "tf32": 4, "tfloat32": 4,
    "u64": 8, "uint64": 8, "i64": 8, "int64": 8, "f64": 8, "fp64": 8, "float64": 8,
}


def element_bytes(dtype: object) -> int:
    return ELEMENT_BYTES.get(str(dtype).lower(), 0)


def box_bytes(tm) -> int:
    box = tm.fields.get("box", ())
    if isinstance(box, int):
        box = (box,)
    strides = tm.fields.get("element_strides", (1,) * len(box))
    if isinstance(strides, int):
        strides = (strides,)
    n = element_bytes(tm.fields.get("dtype", "bf16")) or 1
    for b, s in zip(box, strides):
        s = max(int(s), 1)
        n *= -(-int(b) // s)
    return n
