"""An agent's conversation log in SQL, which `StateStore` delegates to: its messages and turn keys (`message_log`),
their eviction from the window with its summaries and pressure state (`eviction`), and its steps with their token
use (`step_log`), a step's commit being one statement on Postgres (`step_commit`)."""
