"""Archival memory: one agent's long-term facts, their SQL ledger beside the vector store, the write path's
policy, and the repairs that keep both sides agreeing (reconcile, re-embed, re-key).
"""
