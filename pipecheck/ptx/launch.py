"""A kernel launch recorded by `pipecheck capture` (replay/capture.c): the kernel, its module's PTX, the
launch shape and the parameter bytes, so that the front end checks the kernel at the values it ran with.
"""
from __future__ import annotations

import json

from pathlib import Path

from ..core.diagnostics import Span, error
from ..core.records import record

LAUNCH_SCHEMA = "pipecheck-launch/1"


@record
class Launch:
    """One recorded launch: what `pipecheck verify DIR/launch-K.json` reads."""

    path: str
    kernel: str
    image: str  # the module file beside it
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    dynamic_smem: int
    params: bytes  # from the first parameter's first byte

    def value(self, offset: int, nbytes: int) -> int | None:
        if offset + nbytes > len(self.params):
            return None
        return int.from_bytes(self.params[offset:offset + nbytes], "little")


def is_launch_file(path: str) -> bool:
    if not path.endswith(".json"):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("schema") == LAUNCH_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def read_launch(path: str) -> Launch:
    where = Span(path, 1, 1)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise error("import", f"cannot read {path}: {exc.strerror}", where) from None
    except ValueError as exc:
        raise error("syntax", f"{path} is not JSON: {exc}", where) from None
    base = Path(path).parent
    try:
        image = str(base / data["image"]) if data["image"] else ""
        params = (base / data["params"]).read_bytes()
        layout = data.get("param_layout") or []
        # the driver's offsets count from where its parameter space begins (cuFuncGetParamInfo); the front
        # end's param_<offset> from the first parameter
        start = min((int(o) for o, _ in layout), default=0)
        params = params[start:]
        launch = Launch(path, data["kernel"], image, tuple(data["grid"]), tuple(data["block"]),  # type: ignore[arg-type]
                        tuple(data["cluster"]), int(data["dynamic_smem"]), params)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError) as exc:
        raise error("syntax", f"{path}: not a pipecheck launch record ({exc})", where) from None
    except OSError as exc:
        raise error("import", f"{path}: cannot read its parameter bytes: {exc.strerror}", where) from None
    if not launch.image:
        raise error("rule", f"{path}: the program launched {launch.kernel} from a module loaded before the capture "
                    "began or not through cuModuleLoad*: no image was recorded", where)
    if not launch.image.endswith(".ptx"):
        raise error("rule", f"{path}: the module of {launch.kernel} is {Path(launch.image).name}, machine code without "
                    "PTX: build it with PTX in the module (nvcc -lineinfo, --ptx or -gencode code=compute_90a) to "
                    "check this launch", where)
    return launch


__all__ = ["Launch", "LAUNCH_SCHEMA", "is_launch_file", "read_launch"]
