"""Recall memory: search over every stored message of an agent (the database's own full-text index), and its
ranking beyond the fused score.
"""
