"""A run's events on their way to whoever watches: fan-out in this process, relay across processes, and one
subscriber's ordered view.
"""
