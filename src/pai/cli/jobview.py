"""Jobs on screen: the list as a table, one job as a tree of roles and tasks, what its tasks
used as a table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from pai.cli.formatting import NONE, duration, state, table, timestamp
from pai.sdk import ExitSpec, JobDetail, JobInfo, RetryDetails, TaskStatus
from pai.sdk.monitoring import UsageSeries

DIAGNOSTIC_LINES_SHOWN = 4
"""A Python traceback ends with the file and line, the source line, a caret and the error."""
MIB = 1024 * 1024


def jobs_table(jobs: Sequence[JobInfo]) -> Table:
    result = table(
        "JOB", "STATE", "VC", "PRIORITY", "GPUS", "TASKS", "RETRIES", "SUBMITTED", "DURATION"
    )
    for job in jobs:
        result.add_row(
            job.full_name,
            state(job.state),
            job.virtual_cluster or NONE,
            job.job_priority or NONE,
            str(job.total_gpu_number),
            str(job.total_task_number),
            str(job.retries),
            timestamp(job.submission_time),
            duration(job.launched_time, job.completed_time),
        )
    return result


def job_tree(job: JobDetail) -> Tree:
    """The job, then one branch per role with one line per task."""
    status = job.job_status
    tree = Tree(Text.assemble((job.full_name, "bold"), "  ", state(job.state)))
    tree.add(
        f"virtual cluster {status.virtual_cluster or NONE} · priority {job.job_priority or NONE}"
        f" · submitted {timestamp(status.submission_time)}"
        f" · ran {duration(status.launched_time, status.completed_time)}"
    )
    tree.add(f"retries {retries(status.retries, status.retry_details)}")
    if job.tags:
        tree.add(f"tags {', '.join(job.tags)}")
    if job.state == "WAITING" and status.wait_reason is not None:
        tree.add(Text.assemble(("waiting: ", "yellow"), status.wait_reason.message))
    if job.finished and status.app_exit_code is not None:
        _add_exit(tree, status.app_exit_code, status.app_exit_spec, status.app_exit_diagnostics)
    for role, detail in job.task_roles.items():
        count = len(detail.task_statuses)
        branch = tree.add(Text(f"role {role} ({count} task{'s' if count != 1 else ''})", "bold"))
        for task in detail.task_statuses:
            _add_task(branch, task, status.app_exit_code if job.finished else None)
    return tree


def retries(total: int, details: RetryDetails) -> str:
    """`2 (user 1, platform 1, resource 0)`: retries by the cause OpenPAI accounts them to."""
    return (
        f"{total} (user {details.user}, platform {details.platform}, resource {details.resource})"
    )


def exit_summary(code: int, spec: ExitSpec | None) -> str:
    """`exit 137 (ContainerSigKilled)`."""
    phrase = spec.phrase if spec is not None and spec.phrase else None
    return f"exit {code}" + (f" ({phrase})" if phrase else "")


def _add_task(branch: Tree, task: TaskStatus, job_exit_code: int | None) -> None:
    """One line per task; its exit is explained unless the job's exit above already says it."""
    line = Text.assemble((f"task {task.task_index}", "bold"), "  ", state(task.task_state))
    where = task.container_node_name or NONE
    if task.container_ip:
        where += f" ({task.container_ip})"
    line.append(f"  node {where}")
    line.append(f"  GPUs {','.join(map(str, task.gpus)) or NONE}")
    ports = ", ".join(f"{label}:{value}" for label, value in (task.container_ports or {}).items())
    line.append(f"  ports {ports or NONE}")
    line.append(f"  retries {task.retries}")
    if task.isolation == "host" and task.docker_image:
        line.append(f"  on the host (image {task.docker_image} not used)", style="dim")
    elif task.isolation == "container":
        line.append(f"  in a container of {task.docker_image}", style="dim")
    if task.preparing and task.task_state == "WAITING":
        line.append(f"  {task.preparing}", style="yellow")
    if task.node_problem:
        line.append(f"  node {task.node_problem}", style="bold red")
    node = branch.add(line)
    if task.container_exit_code is not None and task.task_state not in ("WAITING", "RUNNING"):
        _add_exit(
            node,
            task.container_exit_code,
            task.container_exit_spec,
            task.container_exit_diagnostics,
            explain=task.container_exit_code != job_exit_code,
        )


def _add_exit(
    parent: Tree,
    code: int,
    spec: ExitSpec | None,
    diagnostics: str | None,
    *,
    explain: bool = True,
) -> None:
    """`exit CODE (Phrase)`, then for a failure why (reason), what to do (solution) and the
    last lines of the diagnostics (enough for a Python error's source line and caret)."""
    style = "green" if code == 0 else "red"
    node = parent.add(Text(exit_summary(code, spec), style=style))
    if code == 0:
        return
    if explain and spec is not None:
        if spec.reason:
            node.add(f"reason: {spec.reason}")
        for step in spec.solution:
            node.add(f"solution: {step}")
    last_lines = (diagnostics or "").rstrip().splitlines()[-DIAGNOSTIC_LINES_SHOWN:]
    if last_lines:
        node.add(Text("\n".join(["diagnostics:", *last_lines]), style="dim"))


def usage_table(series: Sequence[UsageSeries]) -> Table:
    """Each task's CPU, memory and GPU use: now, on average, and at its peak."""
    shown = table("TASK", "NODE", "SAMPLES", "CPU % NOW/AVG/MAX", "MEMORY MB NOW/MAX", "GPU % AVG")
    for task in series:
        points = task.points
        cpu = [p.cpu_percent for p in points if p.cpu_percent is not None]
        memory = [p.memory_bytes for p in points if p.memory_bytes is not None]
        gpu = [p.gpu_percent for p in points if p.gpu_percent is not None]
        limit = next((p.memory_limit_bytes for p in points if p.memory_limit_bytes), None)
        memory_text = (f"{memory[-1] // MIB} / {max(memory) // MIB}" if memory else NONE) + (
            f" (limit {limit // MIB})" if limit else ""
        )
        shown.add_row(
            f"{task.task_role_name}/{task.task_index}",
            task.node or NONE,
            str(len(points)),
            f"{cpu[-1]:.0f} / {sum(cpu) / len(cpu):.0f} / {max(cpu):.0f}" if cpu else NONE,
            memory_text,
            f"{sum(gpu) / len(gpu):.0f}" if gpu else NONE,
        )
    return shown
