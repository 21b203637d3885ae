"""Decontamination: n-gram overlap with evaluation sets, as a step and as `tokenmill decontaminate`."""
