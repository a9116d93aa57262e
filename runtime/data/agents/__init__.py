"""The example agents `pagemind init` writes into a folder: the companion, the assistant, and `weatherbot.yaml`
with its custom tool beside it (`weather_tools.py`, a module here too, so the tool is linted, type-checked and
imported with the package). The repository's top-level `agents/` holds byte-identical copies of the two agents
(tests/runtime/cli/test_first_hour.py keeps them so)."""
