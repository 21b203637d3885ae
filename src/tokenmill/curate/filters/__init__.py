"""Per-document filters: language ID, URL rules, PII, and the Gopher/C4/FineWeb/RefinedWeb heuristics."""
