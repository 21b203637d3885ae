"""The base layer: vocabulary every package shares, importing no other tokenmill package.

``io``, ``report`` and ``engine`` each depend on this layer and never on one another at module level, so
each stays a leaf that can be read, tested and replaced alone (``tests/test_layering.py`` checks it).

``inputs``      ``InputFile`` (one resolved input) and ``WorkUnit`` (a slice of one file)
``accounting``  ``Reject`` (one unusable record) and summable ``Stats``
``files``       ``atomic_write``: temporary name, fsync, rename
``memory``      ``process_peak_rss_mb``: this process's high-water mark
"""
