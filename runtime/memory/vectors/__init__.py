"""Vector stores: the interface every backend implements (Qdrant Edge embedded, a Qdrant server), how points
are indexed, and the process's shared store.
"""
