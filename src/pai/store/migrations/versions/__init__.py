"""Migration scripts, one per schema revision, in a single linear chain."""
