"""A container runtime of its own, with its own images and a private registry on 127.0.0.1, for
tests, benchmarks and trying container tasks on a machine that reaches no outside registry.

It writes the runtime's configuration files into its root and hands out the variables that
point podman at them (`env`): its own image store, a registry on 127.0.0.1 that asks for a
password (Debian's `docker-registry`, with an htpasswd file), and runtime settings that work
where systemd does not run containers (`runc` and the `cgroupfs` cgroup manager, the file
events log) and where the runtime may not raise resource limits (ulimits at or below this
process's hard limits). Images are made from a root file system: busybox from Debian's
`busybox-static`, or a minimal Debian with Python 3 and an ssh client made by `debootstrap`
(`debian_python`).

    with ContainerSandbox(Path("/tmp/sandbox")) as sandbox:
        image = sandbox.busybox("pai-test/busybox:1")   # in the registry, with a password
        ...  # a PAI started with `sandbox.env` runs tasks from `image`

`close()` removes every container and image it made, the registry, and its root.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import secrets
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from pai.executors.sandboxes.base import Sandbox

REGISTRY_USER = "pai"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PYTHON_PACKAGES = ("python3", "openssh-client")
REGISTRY_WAIT = 30.0


class SandboxUnavailable(RuntimeError):
    """The machine lacks what the sandbox needs; the message says what to install."""


def missing_tools() -> list[str]:
    """The Debian packages the sandbox needs that this machine lacks."""
    needed = {
        "podman": "podman",
        "docker-registry": "docker-registry",
        "busybox": "busybox-static",
        "htpasswd": "apache2-utils",
    }
    return [package for tool, package in needed.items() if shutil.which(tool) is None]


class ContainerSandbox(Sandbox):
    """See the module docstring. `start()` (or `with`) builds it, `close()` takes it down."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._runroot: Path | None = None
        """podman's run-time state, in a short path of its own: podman refuses a runroot of over
        50 characters in the `container cleanup` that ends each container, and `podman run` then
        waits out its 20 s conmon timeout for a cleanup that never comes."""
        self.password = secrets.token_urlsafe(16)
        self._registries: dict[str, subprocess.Popen[bytes]] = {}
        """`HOST:PORT` of each registry process (all serve the same images), the first on
        127.0.0.1."""

    @property
    def registry(self) -> str:
        """The registry's `HOST:PORT` on 127.0.0.1, the first part of its images' names."""
        return next(iter(self._registries))

    def serve_on(self, host: str) -> str:
        """Serve the registry's images on `host` too (an address other machines reach, such as
        a test network's); its `HOST:PORT`."""
        return self._start_registry(host)

    @staticmethod
    def on(registry: str, image: str) -> str:
        """`image` as named by another of the sandbox's registries."""
        return f"{registry}/{image.split('/', 1)[1]}"

    @property
    def env(self) -> dict[str, str]:
        """What points podman (and a PAI that starts it) at this sandbox."""
        return {
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.root / "registries.conf"),
        }

    def start(self) -> None:
        missing = missing_tools()
        if missing:
            raise SandboxUnavailable(f"install {', '.join(missing)} (apt-get install)")
        self.root.mkdir(parents=True, exist_ok=True)
        self._runroot = Path(tempfile.mkdtemp(prefix="pai-run-", dir="/tmp"))
        self._write_configuration()
        self._write_credentials()
        self._start_registry("127.0.0.1")

    def close(self) -> None:
        """Take everything down; safe to call more than once and after a failed start."""
        for process in self._registries.values():
            process.kill()
            process.wait()
        self._registries.clear()
        if (self.root / "storage.conf").exists():
            self.podman("rm", "--all", "--force", "--time", "0", check=False)
            self.podman("system", "reset", "--force", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        if self._runroot is not None:
            shutil.rmtree(self._runroot, ignore_errors=True)

    # -- images -----------------------------------------------------------------------------------

    def busybox(self, name: str) -> str:
        """An image of busybox (a shell and the usual tools, no Python) pushed to the registry
        as `name`; its full name."""
        rootfs = self.root / "rootfs-busybox"
        if not rootfs.exists():
            (rootfs / "bin").mkdir(parents=True)
            for folder in ("etc", "tmp", "root", "proc", "sys", "dev", "usr/bin", "sbin"):
                (rootfs / folder).mkdir(parents=True, exist_ok=True)
            (rootfs / "tmp").chmod(0o1777)
            busybox = rootfs / "bin" / "busybox"
            shutil.copy2(_which("busybox"), busybox)
            subprocess.run([str(busybox), "--install", "-s", str(rootfs / "bin")], check=False)
            _relink_applets(rootfs / "bin")
            (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
            (rootfs / "etc" / "group").write_text("root:x:0:\n")
        return self.image_from(rootfs, name)

    def image_from(self, rootfs: Path | str, name: str) -> str:
        """An image of the root file system `rootfs` (a folder or a tar file) pushed to the
        registry as `name`; its full name. The local copy is removed: the first task that
        needs the image pulls it, with the password."""
        local = f"localhost/{name}"
        if Path(rootfs).is_dir():
            archive = self.root / f"{name.replace('/', '_').replace(':', '_')}.tar"
            with tarfile.open(archive, "w") as tar:
                tar.add(rootfs, arcname=".")
        else:
            archive = Path(rootfs)
        self.podman("import", str(archive), local)
        full = f"{self.registry}/{name}"
        self.push(local, full)
        self.podman("rmi", "--force", local)
        return full

    def push(self, local: str, full: str) -> None:
        self.podman("push", "--authfile", str(self.auth_file()), local, full)

    def remove_image(self, full: str) -> None:
        """Remove an image from this machine's store (the registry keeps it), under every name
        it has there: a task that checked the registry's credentials also pulled it by digest,
        and removing one name alone would leave its layers for the next pull to skip."""
        found = self.podman("image", "inspect", "--format", "{{.Id}}", full, check=False)
        self.podman("rmi", "--force", "--ignore", found.strip() or full, check=False)

    def auth_file(self, password: str | None = None) -> Path:
        """A credentials file for the registry (with another password, to be refused)."""
        password = self.password if password is None else password
        token = base64.b64encode(f"{REGISTRY_USER}:{password}".encode()).decode()
        path = self.root / f"auth-{secrets.token_hex(4)}.json"
        auths = {registry: {"auth": token} for registry in self._registries}
        path.write_text(json.dumps({"auths": auths}))
        path.chmod(0o600)
        return path

    def podman(self, *arguments: str, check: bool = True) -> str:
        done = subprocess.run(
            ["podman", *arguments],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"podman {' '.join(arguments)}: {done.stderr.strip()}")
        return done.stdout.strip()

    # -- building ---------------------------------------------------------------------------------

    def _write_configuration(self) -> None:
        nofile = _at_most_hard(resource.RLIMIT_NOFILE, 1024)
        nproc = _at_most_hard(resource.RLIMIT_NPROC, 4096)
        runtime = 'runtime = "runc"\n' if shutil.which("runc") else ""
        (self.root / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            "[engine]\n"
            f'{runtime}cgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        )
        (self.root / "storage.conf").write_text(
            '[storage]\ndriver = "overlay"\n'
            f'graphroot = "{self.root / "storage"}"\nrunroot = "{self._runroot}"\n'
        )

    def _write_credentials(self) -> None:
        htpasswd = subprocess.run(
            ["htpasswd", "-B", "-i", "-n", REGISTRY_USER],
            input=self.password,
            capture_output=True,
            text=True,
            check=True,
        )
        (self.root / "htpasswd").write_text(htpasswd.stdout)

    def _start_registry(self, host: str) -> str:
        """A registry process on `host` serving the sandbox's images; its `HOST:PORT`."""
        address = f"{host}:{_free_port(host)}"
        config = self.root / f"registry-{len(self._registries)}.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.root / 'registry'}\n"
            f"http:\n  addr: {address}\n  secret: {secrets.token_hex(16)}\n"
            f"auth:\n  htpasswd:\n    realm: pai-sandbox\n    path: {self.root / 'htpasswd'}\n"
        )
        with open(self.root / "registry.log", "ab") as log:
            process = subprocess.Popen(
                [_which("docker-registry"), "serve", str(config)],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self._registries[address] = process
        # Plain HTTP: the registry has no certificate (a real one would, see docs/deploy.md).
        (self.root / "registries.conf").write_text(
            "".join(
                f'[[registry]]\nlocation = "{registry}"\ninsecure = true\n'
                for registry in self._registries
            )
        )
        deadline = time.monotonic() + REGISTRY_WAIT
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((host, int(address.rsplit(":", 1)[1])), timeout=1):
                    return address
            except OSError:
                if process.poll() is not None:
                    break
                time.sleep(0.05)
        log_text = (self.root / "registry.log").read_text(errors="replace")[-2000:]
        raise SandboxUnavailable(f"the registry did not start:\n{log_text}")


def debian_python(directory: Path) -> Path:
    """A tar of a minimal Debian root file system with Python 3 and OpenSSH's client, made once
    in `directory` with `debootstrap` from Debian's mirror; its path."""
    archive = directory / f"debian-{DEBIAN_SUITE}-{'-'.join(PYTHON_PACKAGES)}.tar"
    if archive.exists():
        return archive
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailable("install debootstrap (apt-get install debootstrap)")
    rootfs = directory / "debian-rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    done = subprocess.run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PYTHON_PACKAGES)}",
            DEBIAN_SUITE,
            str(rootfs),
            DEBIAN_MIRROR,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxUnavailable(f"debootstrap failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    for unneeded in ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt"):
        shutil.rmtree(rootfs / unneeded, ignore_errors=True)
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        tar.add(rootfs, arcname=".")
    partial.rename(archive)
    shutil.rmtree(rootfs, ignore_errors=True)
    return archive


def _relink_applets(folder: Path) -> None:
    """Make the applets' links relative (`busybox --install -s` points them at the folder's
    path on this machine, which the image does not have)."""
    for link in folder.iterdir():
        if link.is_symlink():
            link.unlink()
            link.symlink_to("busybox")


def _which(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise SandboxUnavailable(f"{tool} is not installed")
    return found


def _at_most_hard(limit: int, wanted: int) -> int:
    _, hard = resource.getrlimit(limit)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
