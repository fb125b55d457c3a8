"""The front end's limits on its input (docs/errors.md): past them a spec is refused with a located error."""
from __future__ import annotations

MAX_IMPORT_DEPTH = 16
MAX_SPEC_CHARS = 4_000_000  # a spec is text a person writes; this is a hundred times the largest one we know
MAX_NESTING = 100  # levels of the syntax tree: nested expressions, statements and blocks
