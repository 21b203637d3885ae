"""Accounting: every record in = kept + filtered (by reason) + rejected (by reason)."""

from tokenmill.base.accounting import Reject, Stats, write_rejects

__all__ = ["Reject", "Stats", "write_rejects"]
