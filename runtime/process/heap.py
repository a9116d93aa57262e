"""Handing the C heap's free pages back to the system after a load or a large computation.

glibc keeps freed memory below its mmap threshold (which grows to 32 MB as large blocks come and go) in the heap,
so a process's resident size stays at the peak of whatever it once built or computed. `release_free_memory` is
called where a peak has just passed: after the tiktoken encoding and the embedding model are built (their parsing
leaves ≈ 4 MB and ≈ 8 MB free), and after an embedding of a long text (≈ 60 MB at 512 tokens,
`memory.onnx_arena`). It costs a walk of the heap's free blocks (≈ 0.05 ms), so it is not called on hot paths.

glibc also gives every thread that mallocs while another does an arena of its own (up to 8 per CPU), and each
keeps the pages its thread's peak left; `limit_malloc_arenas` caps them when the embedding model loads, since
embeddings run in whichever worker thread asks (`embeddings.aembed`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any

MALLOC_ARENAS = 2
"""Arenas once the embedding model loads: the main thread's and one for the worker threads (most of whose C
work is onnxruntime's, one run at a time per thread, or runs under the GIL)."""
_M_ARENA_MAX = -8  # glibc's malloc.h


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`; nothing elsewhere)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> None:
    """Let glibc make at most `count` malloc arenas from now on (threads beyond share them; nothing elsewhere).
    Ten texts embedded at once from worker threads left ≈ 13 MB more behind with glibc's default (bench/RESULTS.md)."""
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, count)


def _libc_function(name: str) -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


_MALLOC_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")
