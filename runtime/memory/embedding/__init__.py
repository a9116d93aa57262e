"""Text embeddings: the `Embedder` interface, the shipped offline models and their profiles, the converted
multilingual model, and onnxruntime's memory.

Every import of onnxruntime (fastembed's, the model conversion's, the arena's) is in this package, so its
telemetry is switched off here, before any of them: importing onnxruntime otherwise writes a device id and an
event database under ~/.cache/Microsoft/DeveloperTools and a session file in the temp folder, and only this
variable, set before the import, stops it (`onnxruntime.disable_telemetry_events()` comes too late).
"""

from pagemind.runtime.process.settings import Settings

Settings.export("ORT_DISABLE_TELEMETRY", "1", replace=False)
