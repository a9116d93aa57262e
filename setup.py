"""The one thing pyproject.toml cannot say: the packages are discovered under the product's top-level folders and
installed under the `pagemind` namespace (`runtime/memory/recall` → `pagemind.runtime.memory.recall`). Everything
else about the distribution is in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ("runtime", "tools", "blocks", "scheduler")

setup(packages=[f"pagemind.{name}" for name in find_packages(include=[*FOLDERS, *(f"{f}.*" for f in FOLDERS)])])
