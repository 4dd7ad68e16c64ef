"""Microsoft's OpenPAI JavaScript SDK, unchanged, against a real `pai up`: an OpenPAI user's
script (`openpai_sdk_scenario.js`) logs in with a form, submits an OpenPAI job file that uses
skuNum, lists and inspects it, reads its config, tags it, stops it and reads its attempts, and
manages virtual clusters, users and groups, all through the SDK's own calls and URLs (the
cluster's address, as OpenPAI users configure it, with its `/rest-server` prefix)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e.pai_process import ADMIN_PASSWORD, PaiUp

HERE = Path(__file__).parent
SCENARIO = HERE / "openpai_sdk_scenario.js"
JOB_FILE = HERE / "jobs" / "openpai-skunum.yaml"
SCENARIO_TIMEOUT_SECONDS = 180

# On the worker that runs test_openpai_schema.py too: one `npm ci` of the SDK instead of two.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("openpai-sdk")]


def run_scenario(node: str, openpai_sdk: Path, server: PaiUp) -> dict[str, Any]:
    env = {
        **os.environ,
        "NODE_PATH": str(openpai_sdk),
        "PAI_URL": server.url,
        "PAI_USERNAME": "admin",
        "PAI_PASSWORD": ADMIN_PASSWORD,
        "PAI_JOB_FILE": str(JOB_FILE),
    }
    finished = subprocess.run(
        [node, str(SCENARIO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
    )
    assert finished.stdout, finished.stderr
    results: dict[str, Any] = json.loads(finished.stdout)
    assert finished.returncode == 0, json.dumps(results, indent=2)
    return results


def test_openpai_sdk_drives_pai_unchanged(node: str, openpai_sdk: Path, pai_up: PaiUp) -> None:
    results = run_scenario(node, openpai_sdk, pai_up)

    assert results["info"]["launcherType"] == "k8s"
    assert results["basicLogin"] == {"user": "admin", "admin": True, "lifetime": 3600}

    # the job file's two tasks, two CPU cells each, run and are listed, read and shown as pods
    assert results["running"]["state"] == "RUNNING"
    assert [task["taskState"] for task in results["running"]["roles"]["taskrole"]] == [
        "RUNNING",
        "RUNNING",
    ]
    assert results["listJobs"] == [["openpai-skunum", "RUNNING"]]
    assert results["listJobsWithTotalCount"] == {"totalCount": 1, "names": ["openpai-skunum"]}
    assert results["getJobConfig"]["extras"]["hivedScheduler"]["taskRoles"]["taskrole"] == {
        "skuNum": 2,
        "skuType": "CPU",
    }
    nodes = {task["containerNodeName"] for task in results["running"]["roles"]["taskrole"]}
    assert sorted(pod["node"] for pod in results["pods"]) == sorted(
        task["containerNodeName"] for task in results["running"]["roles"]["taskrole"]
    )
    assert {(pod["job"], pod["role"], pod["phase"]) for pod in results["pods"]} == {
        ("openpai-skunum", "taskrole", "Running")
    }
    assert nodes <= {node["name"] for node in results["nodes"]}
    assert results["nodes"][0] == {
        "name": "node1",
        "address": "127.0.0.1",
        "cpu": "4",
        "ready": "True",
    }

    # tags, stop, attempts
    assert results["tagsAfterAdd"] == ["from-the-sdk"]
    assert results["tagsAfterDelete"] == []
    assert results["stopped"]["state"] == "STOPPED"
    assert results["jobAttempts"] == [
        {"attemptIndex": 0, "isLatest": True, "state": "STOPPED", "jobName": "openpai-skunum"}
    ]
    assert results["jobAttempt"] == {"attemptIndex": 0, "state": "STOPPED", "roles": ["taskrole"]}

    # virtual clusters of the four-node cluster file: 3 of its 4 nodes are `default`'s
    assert results["virtualClusters"] == ["default", "research"]
    assert results["virtualCluster"] == {"capacity": 75, "gpu": 0, "cpu": 16}
    assert results["skuTypes"] == {"CPU": {"gpu": 0, "cpu": 1, "memory": 1024}}

    # users and groups
    assert results["users"] == ["admin", "sdk_user"]
    assert results["user"] == {
        "email": "sdk_user@example.com",
        "admin": False,
        "virtualCluster": ["default"],
    }
    assert results["groups"] == ["admingroup", "default", "sdk_group"]
    assert results["group"]["acls"]["virtualClusters"] == ["research"]
    assert results["groupMembers"] == [["sdk_user", False]]
    assert results["userAfterGroup"] == ["default", "research"]
