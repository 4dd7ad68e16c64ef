"""Routers of the identity API; each module owns one OpenPAI path family."""
