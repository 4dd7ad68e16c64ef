"""Team storage: storages an administrator defines and groups grant, the files in them, and
how a job's tasks find them.

- `kinds`: what a storage is (a directory every node sees at one path, or an S3 bucket) and
  the checks of its definition.
- `paths`: paths inside a storage, refused when they could leave it.
- `backends`: reading and writing the files of each kind, streamed in bounded memory.
- `access`: who may use which storage (through their groups; `default` grants the defaults).
- `catalog`: defining, changing and removing storages (administrators).
- `transfers`: uploads (whole or resumable) and downloads on behalf of a user.
- `jobs`: the storages a job mounts, fixed at submission, and what each task gets from them.
"""
