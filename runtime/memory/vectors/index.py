"""How the archival store indexes dense vectors, the same on both backends (Qdrant Edge and a Qdrant server).

Every search is one agent's (the filter always names `agent_id`), so there is no global graph: HNSW `m = 0`, and
`payload_m` links a separate graph per value of the tenant index on `agent_id` (`is_tenant`, the only payload index
with `enable_hnsw`). Vectors are also kept as int8 (scalar quantization, in RAM): searches walk the graph on the
int8 copies and rescore the best `oversampling × limit` with the float32 originals.

Exact or approximate, per segment and per search (Qdrant's own planning):

- points in the segment still being written (appendable, not yet optimized) are always compared exactly; the
  optimizer turns that segment into an indexed one once its vectors pass `indexing_threshold_kb`
  (≈ `indexing_points(dim)` vectors; Qdrant Edge optimizes only when asked: `EdgeBackend.optimize`, which the
  backend starts itself once that many points were written; a server does it in the background);
- in an indexed segment, a search whose filter matches fewer than `full_scan_threshold_kb` worth of vectors
  (≈ `exact_below(dim)` points: an agent with fewer memories than that) reads them through the payload index and
  compares each one exactly: cheaper than a graph walk at that size, and exact. Above it, the agent's HNSW graph
  is searched with `hnsw_ef` candidates: approximate (recall@10 against exact is reported by
  bench/archival_latency.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexPlan:
    """The dense index's parameters (see the module docstring for what each decides)."""

    m: int = 0  # no global graph: every search names one agent
    payload_m: int = 32  # edges per node of each agent's own graph (16 gave recall@10 0.95 at ef 128, 20k points)
    ef_construct: int = 200
    full_scan_threshold_kb: int = 2_000  # below this much vector data matching a filter, compare exactly
    indexing_threshold_kb: int = 4_000  # an appendable segment with more vector data than this gets indexed
    max_segment_size_kb: int = 150_000  # the optimizer never builds a bigger segment (≈ 100k vectors of 384-d)
    default_segment_number: int = 4  # more than this many segments get merged (up to the size above)
    # candidates a search keeps while walking the graph: recall@10 against exact search at 100,000 memories per agent
    # was 0.93 at 160, 0.96 at 256, 0.97 at 400, 0.98 at 600, 0.985–0.989 at 800 (bench/RESULTS.md; ~0.3–0.5 ms of CPU
    # per 200 more); a larger ef_construct lifts it too, but makes every optimizer run (which pauses the process)
    # twice as long
    hnsw_ef: int = 800
    # the write path's nearest same-kind neighbours (dedupe, supersede): a near-copy lies next to the new memory's
    # vector, which a short walk finds; the full hnsw_ef there cost an insert ~1 ms at 100,000 memories
    neighbour_ef: int = 128
    oversampling: float = 2.0  # int8 candidates rescored with the originals, per result asked for
    quantile: float = 0.99  # of the values the int8 range covers (outliers clipped)
    # Payloads (what a hit's record is rebuilt from) in RAM, not read from disk: each search reads ~100 of them,
    # one random page each; on disk that was ~30 µs apiece once an agent outgrew the page cache (100,000 memories:
    # 3 ms a search; the OS kept none of a cold segment's pages cached). ~400 bytes of RAM a memory.
    payload_in_ram: bool = True
    # ... once the shard holds this many points. Below, the page cache keeps what searches read (30,000 per agent:
    # no faults), and a segment's in-RAM payload storage would map its whole first page: a 32 MB file that even an
    # empty shard has (bench/RESULTS.md, "Process memory", rss2: 40 MB of RSS for an empty shard against 7 MB)
    payload_in_ram_from: int = 50_000

    @staticmethod
    def vector_bytes(dim: int) -> int:
        """Bytes of one float32 vector of `dim` dimensions."""
        return 4 * dim

    def exact_below(self, dim: int) -> int:
        """How many of an agent's memories an indexed segment still searches exactly (below: exact)."""
        return self.full_scan_threshold_kb * 1024 // self.vector_bytes(dim)

    def indexing_points(self, dim: int) -> int:
        """How many points the appendable segment holds before the optimizer indexes it."""
        return self.indexing_threshold_kb * 1024 // self.vector_bytes(dim)


PLAN = IndexPlan()
