"""A memory's life after it is written: the salience gate, expiry read from its wording, decay from disuse,
episodes of ended sessions, and the days an agent was in use.
"""
