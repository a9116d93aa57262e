"""Generators for the docs pages that must follow the code: each reads the code at build time (the spec models, the
FastAPI app, the CLI parser, the environment variables the source reads, the layer contracts) and returns
Markdown. `docs/hooks.py` calls them when MkDocs renders the page holding their placeholder."""
