"""Reading and writing the files of a storage, one backend per kind (see `base.Backend`)."""
