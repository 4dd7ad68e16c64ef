"""The web portal: server-rendered pages and small vanilla JavaScript."""
