"""Tool-call traces: event format, recorder, reader, replay and comparison, redaction, timelines."""
