"""Corpus-wide dedup steps: exact (normalised content hash), line/paragraph (CCNet/C4 style) and fuzzy
(MinHash LSH with connected components in bounded memory). Each is a frozen dataclass whose
``stages(upstream)`` returns the stages of a workflow ending in a documents stage; see each module for the
algorithm and its costs, and ``docs/curation.md`` (Deduplication) for the user's view."""
