"""The daemon's HTTP API: the FastAPI application, its routes, bodies and errors, server-sent events, `pagemind
serve`, and the small client the CLI uses.
"""
