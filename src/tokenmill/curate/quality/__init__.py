"""Quality: the fastText classifier step, its training job, the top-k selection, SFT quality scores."""
