"""Handing the C heap's free pages back to the system after a load or a large computation.

glibc keeps freed memory below its mmap threshold (which grows to 32 MB as large blocks come and go) in the heap,
so a process's resident size stays at the peak of whatever it once built or computed. `release_free_memory` is
called where a peak has just passed: after the tiktoken encoding and the embedding model are built (their parsing
leaves ≈ 4 MB and ≈ 8 MB free), and after an embedding of a long text (≈ 60 MB at 512 tokens). It costs a walk
of the heap's free blocks, so it is not called on hot paths.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`; nothing elsewhere)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _malloc_trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


_MALLOC_TRIM = _malloc_trim()
