"""The benchmarks: modules run from the repository root as `python -m bench.NAME`; their figures are in
bench/RESULTS.md, one block per benchmark (`bench.common.write_section`)."""
