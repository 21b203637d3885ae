"""The curate workflow: its stages, per-unit tasks, the ledger join, presets, a track's curation record."""
