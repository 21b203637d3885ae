"""The standard pretraining heuristics as score-then-decide steps (``docs/curation.md`` is their spec).

``length`` (characters), ``gopher_quality`` and ``gopher_repetition`` (Gopher, Rae et al. 2021, Table A1),
``c4`` (C4's line rules, then its document rules; a modifier), ``fineweb`` (FineWeb's own three rules plus
the list-ratio rule), ``refinedweb`` (the line corrections and word-removal rule of DCLM's RefinedWeb
reproduction; a modifier). Defaults are datatrove's. Statistics are computed over whole Arrow batches
(:mod:`tokenmill.curate.filters.heuristics.text`); ``decide`` reads only the statistics and the thresholds.
"""
