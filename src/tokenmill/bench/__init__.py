"""Measured benchmarks: storage formats (``tokenmill bench formats``) and the corpora they run on."""

from tokenmill.bench.formats import bench_formats

__all__ = ["bench_formats"]
