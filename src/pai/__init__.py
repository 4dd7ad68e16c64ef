"""PAI: an open platform for AI that lets an organisation share a GPU cluster among teams."""

__version__ = "0.1.0"
