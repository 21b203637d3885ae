"""Curation: per-document steps that score then decide, corpus-wide steps, the ledger and the funnel."""
