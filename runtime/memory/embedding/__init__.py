"""Text embeddings: the `Embedder` interface, the shipped offline models and their profiles, the converted
multilingual model, and onnxruntime's memory.
"""
