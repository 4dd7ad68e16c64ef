"""The portal's pages, one module per area; each exposes a `router`."""
