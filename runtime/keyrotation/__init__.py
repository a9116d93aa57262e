"""`pagemind keys rotate-data`: every sealed text re-sealed under a new data key, resumable after a kill."""
