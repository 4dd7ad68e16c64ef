"""Trace loaders: hand-checkable inputs, the shipped traces, errors that point at lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pai.sim.traces import (
    Trace,
    TraceFormatError,
    TraceJob,
    detect_kind,
    json_stream,
    load_helios,
    load_itp,
    load_philly_joblog,
    load_philly_vc,
    load_trace,
    read_trace_csv,
    write_trace_csv,
)

FIXTURES = Path(__file__).parent / "fixtures"

PHILLY_VC_SMALL = """\
vc,app_id,submit_time,num_gpu,duration,pcs_service,pcs_model_name
a,0,0,1,100,100.0,M
a,1,50,8,200,1600.0,M
a,2,100,2,10,20.0,M
b,0,0,4,30,120.0,M
b,1,40,1,5,5.0,M
"""

ITP_SMALL = """\
cluster,job_id,submission_time,duration,num_gpu
cluster02,j1,2000,600,8
cluster01,j2,1999,700.5,1
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def schedule(trace: Trace) -> list[tuple[str, float]]:
    return [(job.job_id, job.submit_time_s) for job in trace]


# -- Philly per-VC ---------------------------------------------------------------------------


def test_philly_vc_zero_alignment_starts_every_vc_at_zero(tmp_path: Path) -> None:
    trace = load_philly_vc(write(tmp_path, "vc.csv.gz", PHILLY_VC_SMALL))
    assert schedule(trace) == [("a-0", 0), ("b-0", 0), ("b-1", 40), ("a-1", 50), ("a-2", 100)]
    job = trace.jobs[3]
    assert (job.vc, job.gpus, job.duration_s, job.user) == ("a", 8, 200, None)
    assert trace.metadata["clock"]["alignment"] == "zero"
    assert trace.metadata["clock"]["vc_start_offsets_s"] == {"a": 0, "b": 0}
    assert "user" in trace.metadata["missing"]


def test_philly_vc_end_alignment_ends_every_vc_together(tmp_path: Path) -> None:
    trace = load_philly_vc(write(tmp_path, "vc.csv", PHILLY_VC_SMALL), alignment="end")
    assert schedule(trace) == [("a-0", 0), ("a-1", 50), ("b-0", 60), ("a-2", 100), ("b-1", 100)]
    assert trace.metadata["clock"]["vc_start_offsets_s"] == {"a": 0, "b": 60}


def test_philly_vc_explicit_offsets(tmp_path: Path) -> None:
    path = write(tmp_path, "vc.csv", PHILLY_VC_SMALL)
    trace = load_philly_vc(path, alignment={"a": 10, "b": 0})
    assert [t for _, t in schedule(trace)] == [0, 10, 40, 60, 110]
    assert trace.metadata["clock"]["alignment"] == "explicit"
    with pytest.raises(ValueError, match="no offset for VC\\(s\\) b"):
        load_philly_vc(path, alignment={"a": 10})
    with pytest.raises(ValueError, match="not in the trace: c"):
        load_philly_vc(path, alignment={"a": 0, "b": 0, "c": 0})
    with pytest.raises(ValueError, match="VC b needs an offset >= 0"):
        load_philly_vc(path, alignment={"a": 0, "b": -5})


def test_philly_vc_spread_alignment_is_seeded_and_stays_in_the_window(tmp_path: Path) -> None:
    path = write(tmp_path, "vc.csv", PHILLY_VC_SMALL)
    first = load_philly_vc(path, alignment="spread", seed=7, window_s=1000)
    again = load_philly_vc(path, alignment="spread", seed=7, window_s=1000)
    other = load_philly_vc(path, alignment="spread", seed=8, window_s=1000)
    offsets = first.metadata["clock"]["vc_start_offsets_s"]
    assert schedule(first) == schedule(again)
    assert offsets != other.metadata["clock"]["vc_start_offsets_s"]
    assert 0 <= offsets["a"] <= 900 and 0 <= offsets["b"] <= 960
    assert max(job.submit_time_s for job in first) <= 1000
    assert first.metadata["clock"]["seed"] == 7


def test_unknown_alignment_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown clock alignment 'start'"):
        load_philly_vc(write(tmp_path, "vc.csv", PHILLY_VC_SMALL), alignment="start")  # type: ignore[arg-type]


# -- ITP -------------------------------------------------------------------------------------


def test_itp_maps_each_cluster_to_a_vc(tmp_path: Path) -> None:
    trace = load_itp(write(tmp_path, "itp.csv", ITP_SMALL))
    assert schedule(trace) == [("j2", 1999), ("j1", 2000)]
    assert [(j.vc, j.cluster, j.gpus, j.duration_s) for j in trace] == [
        ("cluster01", "cluster01", 1, 700.5),
        ("cluster02", "cluster02", 8, 600),
    ]
    assert trace.metadata["clock"]["alignment"] == "shared"


def test_itp_can_put_every_job_in_one_vc(tmp_path: Path) -> None:
    trace = load_itp(write(tmp_path, "itp.csv", ITP_SMALL), single_vc="shared")
    assert trace.vcs == ("shared",)
    assert {job.cluster for job in trace} == {"cluster01", "cluster02"}


# -- Philly raw job log ----------------------------------------------------------------------


def test_philly_joblog_follows_the_notebook_conventions() -> None:
    trace = load_philly_joblog(FIXTURES / "philly_cluster_job_log.json")
    assert [job.job_id for job in trace] == ["application_2", "application_1"]
    short, long = trace.jobs
    # application_2 was submitted first (09:00): it sets the clock's origin.
    assert (short.submit_time_s, short.gpus, short.duration_s) == (0, 1, 600)
    assert (short.observed_queue_s, short.status, short.user, short.vc) == (
        30,
        "Killed",
        "userB",
        "vcB",
    )
    # GPUs and machines of the first attempt; run time from first start (10:05) to last end (12:00).
    assert (long.submit_time_s, long.gpus, long.nodes) == (3600, 8, 2)
    assert (long.duration_s, long.observed_queue_s) == (6900, 300)
    assert trace.metadata["clock"]["origin"] == "2017-10-01 09:00:00"
    assert trace.metadata["skipped"] == {
        "no GPUs": 1,
        "no attempts": 1,
        "no end time (still running when logged)": 1,
        "no start time": 1,
    }


def test_philly_joblog_reads_gzip_and_reports_bad_json_with_its_line(tmp_path: Path) -> None:
    text = (FIXTURES / "philly_cluster_job_log.json").read_text()
    assert len(load_philly_joblog(write(tmp_path, "log.gz", text))) == 2
    broken = text.replace('"user": "userB",', '"user": "userB"', 1)
    broken_line = text[: text.index('"user": "userB",')].count("\n") + 1
    with pytest.raises(TraceFormatError, match=r"log\.json:\d+: invalid JSON") as error:
        load_philly_joblog(write(tmp_path, "log.json", broken))
    assert error.value.line == broken_line + 1  # the decoder stops at the next field
    with pytest.raises(TraceFormatError, match="expected a JSON list"):
        load_philly_joblog(write(tmp_path, "object.json", '{"jobs": []}'))


@pytest.mark.parametrize("chunk_chars", [1, 3, 64])
def test_json_list_reader_handles_elements_cut_by_its_buffer(
    tmp_path: Path, chunk_chars: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_stream, "_CHUNK_CHARS", chunk_chars)
    path = write(tmp_path, "list.json", '[12345,\n "ab",\n{"k": [1, 2]} ,\n\n 6.5e3 ]\n')
    with path.open() as stream:
        items = list(json_stream.JsonListReader(stream, path))
    assert items == [(1, 12345), (2, "ab"), (3, {"k": [1, 2]}), (5, 6500.0)]
    trace = load_philly_joblog(FIXTURES / "philly_cluster_job_log.json")
    assert [job.duration_s for job in trace] == [600, 6900]
    with pytest.raises(TraceFormatError, match=r"bad\.json:3: unexpected text after"):
        load_philly_joblog(write(tmp_path, "bad.json", "[\n]\n]"))


def test_philly_joblog_names_the_job_with_a_bad_field(tmp_path: Path) -> None:
    text = (
        '[\n{"jobid": "j1", "vc": "v", "submitted_time": "2017-13-45 00:00:00", "attempts": []}\n]'
    )
    with pytest.raises(TraceFormatError, match=r"bad\.json:2: job j1: field 'submitted_time'"):
        load_philly_joblog(write(tmp_path, "bad.json", text))


# -- Helios ----------------------------------------------------------------------------------


def test_helios_leaves_out_cpu_jobs_and_jobs_that_never_ran() -> None:
    trace = load_helios(FIXTURES / "helios_cluster_log.csv")
    assert schedule(trace) == [("1001", 0), ("1003", 239)]
    first, second = trace.jobs
    assert (first.vc, first.user, first.gpus, first.cpus, first.nodes) == ("vcX", "uA", 8, 32, 1)
    assert (second.duration_s, second.observed_queue_s, second.status) == (300, 300, "FAILED")
    assert trace.metadata["skipped"] == {"CPU-only job": 1, "never started": 1}
    assert trace.metadata["clock"]["origin"] == "2020-06-09 18:41:01"


def test_helios_can_keep_cpu_jobs_and_reads_epoch_times(tmp_path: Path) -> None:
    assert [
        j.gpus for j in load_helios(FIXTURES / "helios_cluster_log.csv", include_cpu_jobs=True)
    ] == [8, 0, 16]
    epoch = (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "7,u,v,2,4,1,COMPLETED,1591728000,1591728010,1591728110,,10\n"
        "8,u,v,1,4,1,COMPLETED,1591727990,1591727990,1591728000,10,0\n"
    )
    trace = load_helios(write(tmp_path, "epoch.csv", epoch))
    # The empty duration of job 7 is end - start.
    assert [(j.job_id, j.submit_time_s, j.duration_s) for j in trace] == [
        ("8", 0, 10),
        ("7", 10, 100),
    ]


# -- PAI's CSV format ------------------------------------------------------------------------


def sample_trace() -> Trace:
    jobs = (
        TraceJob("j1", "vcA", "alice", 0.0, 4, 3600.0, status="Succeeded", nodes=1),
        TraceJob("j2", "vcB", None, 0.1, 1, 1e-7, observed_queue_s=12.25),
        TraceJob("j3", "vcA", "bob", 12345.678901234567, 0, 0.0, cpus=8, cluster="c1"),
    )
    return Trace("sample", jobs, {})


@pytest.mark.parametrize("name", ["history.csv", "history.csv.gz"])
def test_csv_round_trip_keeps_every_field(tmp_path: Path, name: str) -> None:
    path = write_trace_csv(sample_trace(), tmp_path / name)
    loaded = read_trace_csv(path)
    assert loaded.jobs == sample_trace().jobs
    assert loaded.name == "history"
    assert loaded.metadata["missing"] == []


def test_csv_format_is_the_documented_one(tmp_path: Path) -> None:
    trace = Trace("t", (TraceJob("j1", "vcA", None, 5.0, 2, 60.5),), {})
    path = write_trace_csv(trace, tmp_path / "t.csv")
    assert path.read_text() == "job_id,vc,user,submit_time,gpus,duration\nj1,vcA,,5,2,60.5\n"
    gz_a = write_trace_csv(trace, tmp_path / "a.csv.gz").read_bytes()
    gz_b = write_trace_csv(trace, tmp_path / "b.csv.gz").read_bytes()
    assert gz_a == gz_b  # same trace, same bytes
    assert read_trace_csv(path).metadata["missing"] == [
        "status",
        "cluster",
        "observed_queue",
        "cpus",
        "nodes",
    ]


def test_csv_reader_ignores_unknown_columns(tmp_path: Path) -> None:
    text = "note,job_id,vc,user,submit_time,gpus,duration\nhi,j1,v,,0,1,10\n"
    assert read_trace_csv(write(tmp_path, "x.csv", text)).jobs[0].duration_s == 10


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("job_id,vc,submit_time,gpus,duration\n", 1, "missing column(s) user; found job_id"),
        (
            "job_id,vc,user,submit_time,gpus,duration\nj1,v,u,0,1,10\nj2,v,u,soon,1,10\n",
            3,
            "column 'submit_time': expected a number, got 'soon'",
        ),
        (
            "job_id,vc,user,submit_time,gpus,duration\nj1,v,u,0,1.5,10\n",
            2,
            "column 'gpus': expected a whole number, got '1.5'",
        ),
        (
            "job_id,vc,user,submit_time,gpus,duration\nj1,v,u,0,1,-3\n",
            2,
            "column 'duration': must be at least 0, got '-3'",
        ),
        (
            "job_id,vc,user,submit_time,gpus,duration\nj1,v,u,0,1,nan\n",
            2,
            "column 'duration': expected a finite number",
        ),
        (
            "job_id,vc,user,submit_time,gpus,duration\n\nj1,v,u,0,1\n",
            3,
            "expected 6 fields, found 5",
        ),
        ("job_id,vc,user,submit_time,gpus,duration\nj1,,u,0,1,1\n", 2, "column 'vc' is empty"),
        (
            "job_id,vc,user,submit_time,gpus,duration\nj1,v,u,0,1,1\nj1,v,u,0,1,1\n",
            3,
            "duplicate job id 'j1'",
        ),
    ],
)
def test_bad_rows_are_reported_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(TraceFormatError) as error:
        read_trace_csv(path)
    assert error.value.line == line
    assert str(error.value).startswith(f"{path}:{line}: ")
    assert message in str(error.value)


def test_loaders_name_their_missing_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "itp.csv", "cluster,job_id,submission_time,num_gpu\nc,j,0,1\n")
    with pytest.raises(TraceFormatError, match=r"itp\.csv:1: missing column\(s\) duration"):
        load_itp(path)
    with pytest.raises(TraceFormatError, match="the file is empty"):
        load_philly_vc(write(tmp_path, "empty.csv", ""))


# -- dispatcher and model --------------------------------------------------------------------


def test_formats_are_detected_from_content(tmp_path: Path) -> None:
    assert detect_kind(write(tmp_path, "a.csv.gz", PHILLY_VC_SMALL)) == "philly-vc"
    assert detect_kind(write(tmp_path, "b.txt", ITP_SMALL)) == "itp"
    assert detect_kind(FIXTURES / "helios_cluster_log.csv") == "helios"
    assert detect_kind(FIXTURES / "philly_cluster_job_log.json") == "philly-joblog"
    pai_csv = write_trace_csv(sample_trace(), tmp_path / "c.csv")
    assert detect_kind(pai_csv) == "pai-csv"
    assert len(load_trace(pai_csv)) == 3
    assert len(load_trace(str(FIXTURES / "helios_cluster_log.csv"), include_cpu_jobs=True)) == 3


def test_unknown_or_ambiguous_formats_ask_for_a_kind(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="not a known trace format"):
        load_trace(write(tmp_path, "x.csv", "a,b\n1,2\n"))
    both = "job_id,vc,user,submit_time,gpus,duration,app_id,num_gpu\n"
    with pytest.raises(TraceFormatError, match="fits several formats"):
        load_trace(write(tmp_path, "y.csv", both))
    assert load_trace(write(tmp_path, "z.csv", both), kind="pai-csv").jobs == ()
    with pytest.raises(ValueError, match="unknown trace kind 'yarn'"):
        load_trace(tmp_path / "z.csv", kind="yarn")  # type: ignore[arg-type]


def test_shipped_traces_can_be_relocated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "itp_jobs.csv.gz", ITP_SMALL)
    monkeypatch.setenv("PAI_TRACES_DIR", str(tmp_path))
    assert len(load_trace("itp")) == 2
    with pytest.raises(FileNotFoundError, match=r"philly_vc_jobs\.csv\.gz does not exist"):
        load_trace("philly-vc")


def test_trace_model_keeps_its_promises() -> None:
    trace = sample_trace()
    assert trace.vcs == ("vcA", "vcB")
    assert trace.gpu_hours_by_vc() == {"vcA": 4.0, "vcB": pytest.approx(1e-7 / 3600)}
    only_a = trace.select_vcs(["vcA"])
    assert [job.job_id for job in only_a] == ["j1", "j3"]
    assert only_a.metadata["selected_vcs"] == ["vcA"]
    with pytest.raises(ValueError, match="no VC named vcC"):
        trace.select_vcs(["vcC"])
    with pytest.raises(ValueError, match="sorted by submit time"):
        Trace("bad", tuple(reversed(trace.jobs)), {})


# -- the shipped traces ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def philly() -> Trace:
    return load_trace("philly-vc")


@pytest.fixture(scope="module")
def itp() -> Trace:
    return load_trace("itp")


def test_shipped_philly_trace_has_the_documented_jobs(philly: Trace) -> None:
    assert len(philly) == 109_532
    assert len(philly.vcs) == 12
    assert sum(1 for job in philly if job.vc == "6214e9") == 51_258
    assert sum(job.gpu_seconds for job in philly) / 3600 == pytest.approx(2_678_741, abs=1)
    # Under the default alignment the longest VC (129.4 days) fixes the span.
    assert philly.span_s / 86_400 == pytest.approx(129.4, abs=0.05)
    assert philly.metadata["clock"]["alignment"] == "zero"


def test_shipped_itp_trace_has_the_documented_jobs(itp: Trace) -> None:
    assert len(itp) == 69_351
    assert len(itp.vcs) == 10
    assert sum(itp.gpu_hours_by_vc().values()) == pytest.approx(1_632_719.7, abs=0.1)
    assert (itp.jobs[0].submit_time_s, itp.jobs[-1].submit_time_s) == (1999, 5_175_336)
