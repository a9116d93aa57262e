"""Retrieval shared by archival and recall search: keyword analysis, hybrid ranking, the second round, and
time words (dates for relative words on write, date ranges a query names on read).
"""
