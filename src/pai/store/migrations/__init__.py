"""Alembic migrations of the store, applied programmatically by `Database.upgrade`.

Add a revision by writing `versions/NNNN_<topic>.py` with `revision = "NNNN_<topic>"` and
`down_revision` set to the current head: the chain stays linear.
"""
