"""The pai command line, built on the SDK."""
