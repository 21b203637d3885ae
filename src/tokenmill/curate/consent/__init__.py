"""Consent: robots.txt snapshots, TDM reservations, licences stated in pages, machine-written text."""
