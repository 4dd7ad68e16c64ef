"""OpenLDAP's `slapd` (Debian's package) as the organisation's directory in tests: its own
process on a free loopback port, a fresh database in the test's directory, stopped and removed
when the test ends.

The directory `dc=example,dc=org` holds people under `ou=people` (alice, bob, carol, each with
the password `<name>-secret`, and `al*ce`, whose name is an LDAP filter's wildcard) and two
`groupOfNames` under `ou=groups`: `vision` (alice, carol) and `speech` (bob). The `memberof`
overlay keeps each person's `memberOf` as the groups change, as Active Directory does. PAI finds
people with the service account `cn=pai,ou=services,dc=example,dc=org`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from providers.processes import free_port, stop

SLAPD = "/usr/sbin/slapd"
LDAPMODIFY = "ldapmodify"
BASE = "dc=example,dc=org"
ROOT_DN = f"cn=admin,{BASE}"
SERVICE_DN = f"cn=pai,ou=services,{BASE}"
PEOPLE = f"ou=people,{BASE}"
GROUPS = f"ou=groups,{BASE}"
STARTUP_SECONDS = 20.0

PEOPLE_AND_GROUPS = {
    "people": ("alice", "bob", "carol", "al*ce"),
    "groups": {"vision": ("alice", "carol"), "speech": ("bob",)},
}


def available() -> bool:
    return Path(SLAPD).exists() and shutil.which(LDAPMODIFY) is not None


def password_of(name: str) -> str:
    return f"{name}-secret"


def person_dn(name: str) -> str:
    return f"uid={name},{PEOPLE}"


def group_dn(name: str) -> str:
    return f"cn={name},{GROUPS}"


@dataclass
class Slapd:
    """A running directory and the administrator's tools to change it."""

    url: str
    directory: Path
    root_password: str = field(repr=False)
    service_password: str = field(repr=False)

    def modify(self, ldif: str) -> None:
        """Apply `ldif` with `ldapmodify`, as the directory's administrator does."""
        done = subprocess.run(
            [LDAPMODIFY, "-x", "-H", self.url, "-D", ROOT_DN, "-w", self.root_password],
            input=ldif,
            text=True,
            capture_output=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ldapmodify failed ({done.returncode}): {done.stderr}")

    def add_to_group(self, person: str, group: str) -> None:
        self.modify(
            f"dn: {group_dn(group)}\nchangetype: modify\nadd: member\nmember: {person_dn(person)}\n"
        )

    def remove_from_group(self, person: str, group: str) -> None:
        self.modify(
            f"dn: {group_dn(group)}\nchangetype: modify\ndelete: member\n"
            f"member: {person_dn(person)}\n"
        )

    def delete_person(self, person: str) -> None:
        """Delete the person's entry (the memberof overlay drops them from their groups)."""
        self.modify(f"dn: {person_dn(person)}\nchangetype: delete\n")

    def settings_env(self, **overrides: str) -> dict[str, str]:
        """The `PAI_LDAP_*` variables of a PAI that signs in against this directory."""
        return {
            "PAI_AUTHN_MODE": "ldap",
            "PAI_LDAP_URL": self.url,
            "PAI_LDAP_BIND_DN": SERVICE_DN,
            "PAI_LDAP_BIND_PASSWORD": self.service_password,
            "PAI_LDAP_USER_BASE": PEOPLE,
            "PAI_LDAP_GROUP_BASE": GROUPS,
            **overrides,
        }


@contextmanager
def running_slapd(directory: Path) -> Iterator[Slapd]:
    """Start slapd with the test directory in `directory`; stop it and remove its files after."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "data").mkdir()
    root_password = base64.b32encode(os.urandom(10)).decode().lower()
    service_password = base64.b32encode(os.urandom(10)).decode().lower()
    config = directory / "slapd.conf"
    config.write_text(_config(directory, root_password, service_password))
    port = free_port()
    url = f"ldap://127.0.0.1:{port}"
    log = (directory / "slapd.log").open("w")
    process = subprocess.Popen(
        [SLAPD, "-f", str(config), "-h", f"{url}/", "-d", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_listening(port, process, directory / "slapd.log")
        slapd = Slapd(url, directory, root_password, service_password)
        slapd.modify(_directory_ldif(service_password))
        yield slapd
    finally:
        stop(process)
        log.close()
        shutil.rmtree(directory / "data", ignore_errors=True)


def _config(directory: Path, root_password: str, service_password: str) -> str:
    schemas = "\n".join(
        f"include /etc/ldap/schema/{name}.schema" for name in ("core", "cosine", "inetorgperson")
    )
    return f"""{schemas}
pidfile {directory}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
database mdb
maxsize 10485760
suffix "{BASE}"
rootdn "{ROOT_DN}"
rootpw {_ssha(root_password)}
directory {directory}/data
overlay memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
memberof-refint TRUE
access to attrs=userPassword
    by anonymous auth
    by * none
access to *
    by dn.exact="{SERVICE_DN}" read
    by self read
    by * none
"""


def _directory_ldif(service_password: str) -> str:
    entries = [
        f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example",
        f"dn: ou=services,{BASE}\nobjectClass: organizationalUnit\nou: services",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups",
        f"dn: {SERVICE_DN}\nobjectClass: person\nobjectClass: simpleSecurityObject\n"
        f"cn: pai\nsn: pai\nuserPassword: {_ssha(service_password)}",
    ]
    for name in PEOPLE_AND_GROUPS["people"]:
        entries.append(
            f"dn: {person_dn(name)}\nobjectClass: inetOrgPerson\nuid: {name}\ncn: {name}\n"
            f"sn: {name}\nmail: {name.replace('*', '')}@example.org\n"
            f"userPassword: {_ssha(password_of(name))}"
        )
    for group, members in PEOPLE_AND_GROUPS["groups"].items():
        member_lines = "\n".join(f"member: {person_dn(member)}" for member in members)
        entries.append(
            f"dn: {group_dn(group)}\nobjectClass: groupOfNames\ncn: {group}\n{member_lines}"
        )
    return (
        "\n\n".join(
            f"{entry.split(chr(10), 1)[0]}\nchangetype: add\n{entry.split(chr(10), 1)[1]}"
            for entry in entries
        )
        + "\n"
    )


def _ssha(password: str) -> str:
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"slapd exited with {process.returncode}:\n{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"slapd did not listen on port {port}:\n{log.read_text()}")
