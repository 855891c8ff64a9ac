"""The documentation site, its hooks and the published results tables."""
