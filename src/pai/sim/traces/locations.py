"""Where the trace files shipped with the project (its `data/traces/` folder) are found."""

from __future__ import annotations

import os
from pathlib import Path

TRACES_DIR_ENV = "PAI_TRACES_DIR"

PHILLY_VC_JOBS = "philly_vc_jobs.csv.gz"
ITP_JOBS = "itp_jobs.csv.gz"
PHILLY_MACHINE_LIST = "cluster_machine_list.csv"
PHILLY_VC_QUOTAS = "philly_vc_node_quota_helios_artifact.csv"
OPENB_PODS = "openb_pod_list_default.csv.gz"


def traces_dir() -> Path:
    """The folder holding the shipped traces.

    `$PAI_TRACES_DIR` wins; otherwise the first `data/traces` found walking up from this package
    (a source checkout) or from the working directory.
    """
    configured = os.environ.get(TRACES_DIR_ENV)
    if configured:
        return Path(configured)
    starts = (Path(__file__).resolve().parent, Path.cwd().resolve())
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / "data" / "traces"
            if candidate.is_dir():
                return candidate
    raise FileNotFoundError(
        "cannot find the project's data/traces folder; "
        f"set {TRACES_DIR_ENV} or pass the trace file's path explicitly"
    )


def shipped_file(name: str) -> Path:
    """Path of one shipped trace file, with an error that says where it was looked for."""
    path = traces_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the file's path explicitly")
    return path
