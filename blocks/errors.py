"""The one error core-memory edits raise."""


class BlockEditError(ValueError):
    """An edit the model asked for that cannot be applied; the message tells the model how to fix it."""
