"""Sleep-time reflection: consolidate an agent's memories in one bounded model call (`run.reflect`)."""
