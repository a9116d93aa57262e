"""Triggers: the pure firing rules, what they read and write, and the daemon's per-tick runner."""
