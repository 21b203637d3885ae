"""Selection toward a target: DSIR importance resampling and n-gram perplexity."""
