"""What belongs to the OS process rather than to one agent: settings read from the environment, logging, the
C heap's trimming, and the crash suites' named crash points.
"""
