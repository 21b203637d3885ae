"""``Reject`` and ``Stats`` moved to :mod:`tokenmill.base.accounting` (the base layer); this name stays for
code written against the old path. New code imports from ``tokenmill.base.accounting``."""

from tokenmill.base.accounting import Reject, Stats, write_rejects

__all__ = ["Reject", "Stats", "write_rejects"]
