"""What a curate run reports: the funnel, per-step details, the HTML report."""
