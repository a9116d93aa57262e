"""The durable work queue on the database: the inbox, taking an agent whose work arrived, leases, turn locks,
and waking daemons in other processes.
"""
