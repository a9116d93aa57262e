"""External memory: archival memory (Qdrant) and recall memory (SQL full text), embeddings, ranking."""
