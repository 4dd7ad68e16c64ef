"""What the sandboxes for tests, benchmarks and trials (a Ray cluster of network namespaces, a
container runtime with its own registry) have in common: built by `start()`, or on entering a
`with` block, and taken down by `close()` on leaving it, however it is left."""

from __future__ import annotations

from typing import Self


class Sandbox:
    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()
