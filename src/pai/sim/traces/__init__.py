"""Job traces for the simulator: loaders for public GPU-cluster traces and PAI's own CSV format.

Every loader returns a `Trace`: jobs sorted by submission on one clock, with metadata that records
the source, the clock alignment and every assumption made for data the source lacks.
"""

from pai.sim.traces.alignment import ALIGNMENTS, Alignment
from pai.sim.traces.errors import TraceFormatError
from pai.sim.traces.helios import load_helios
from pai.sim.traces.itp import load_itp
from pai.sim.traces.loading import SHIPPED_TRACES, TRACE_KINDS, TraceKind, detect_kind, load_trace
from pai.sim.traces.locations import traces_dir
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.pai_csv import read_trace_csv, write_trace_csv
from pai.sim.traces.philly_joblog import load_philly_joblog
from pai.sim.traces.philly_vc import PHILLY_WINDOW_S, load_philly_vc

__all__ = [
    "ALIGNMENTS",
    "PHILLY_WINDOW_S",
    "SHIPPED_TRACES",
    "TRACE_KINDS",
    "Alignment",
    "Trace",
    "TraceFormatError",
    "TraceJob",
    "TraceKind",
    "detect_kind",
    "load_helios",
    "load_itp",
    "load_philly_joblog",
    "load_philly_vc",
    "load_trace",
    "read_trace_csv",
    "traces_dir",
    "write_trace_csv",
]
