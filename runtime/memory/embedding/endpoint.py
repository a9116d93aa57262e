"""An OpenAI-compatible `/embeddings` endpoint as an embedder (OpenAI, vLLM, Ollama, llama.cpp server, TEI …).

Used when `PAGEMIND_EMBEDDING_BASE_URL` is set, or `PAGEMIND_EMBEDDING_MODEL` names no local model
(`embedding.configured`). Its answers are checked before they are used: a short, unordered or ragged answer raises
`EmbeddingError` rather than pair texts with other texts' vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pagemind.runtime.memory.embedding.embedders import EmbeddingError, batched, normalise


class OpenAIEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, TEI …)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 128,
        client: Any = None,
    ):
        import openai

        self.model = model
        self.model_id = f"openai-{model}".replace("/", "_")
        self.batch_size = batch_size
        self.client = client or openai.OpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=3)
        self._dim = dim

    @property
    def dim(self) -> int:
        """The vector size (asks the endpoint once when not configured)."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts through the endpoint, `batch_size` per request. Raises EmbeddingError when the endpoint
        fails (after the client's retries) or answers with the wrong number or size of vectors: a short or
        ragged answer would otherwise pair texts with other texts' vectors, or reach a store of another size."""
        import openai

        rows: list[list[float]] = []
        for batch in batched(list(texts), self.batch_size):
            try:
                response = self.client.embeddings.create(model=self.model, input=list(batch))
                data = sorted((d.index, list(d.embedding)) for d in response.data or [])
            except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:  # also: not JSON, no vectors
                raise EmbeddingError(
                    f"embeddings endpoint failed for model {self.model!r}: {type(exc).__name__}: {exc}"
                ) from exc
            if [index for index, _ in data] != list(range(len(batch))):
                raise EmbeddingError(
                    f"embeddings endpoint answered {len(data)} vectors (indexes "
                    f"{[index for index, _ in data][:8]}) for {len(batch)} texts"
                )
            rows += [vector for _, vector in data]
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        sizes = {len(r) for r in rows}
        if len(sizes) != 1 or (self._dim is not None and sizes != {self._dim}) or 0 in sizes:
            raise EmbeddingError(
                f"embeddings endpoint answered vectors of size {sorted(sizes)}; expected "
                f"{self._dim or 'one size'} (PAGEMIND_EMBEDDING_DIM)"
            )
        return normalise(np.asarray(rows, dtype=np.float32))
