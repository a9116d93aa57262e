"""The database's key-check record (`data_keys`): which data key its text is sealed under, checked when it opens."""
