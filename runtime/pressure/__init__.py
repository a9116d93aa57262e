"""The pressure monitor: window budgets, warnings, eviction, summaries, extraction, history repair."""
