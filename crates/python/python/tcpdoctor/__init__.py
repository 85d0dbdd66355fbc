"""tcpdoctor for Python: why TCP requests are slow, as pyarrow tables.

    import tcpdoctor
    t = tcpdoctor.analyze("capture.pcap")        # or the capture's bytes
    t = tcpdoctor.analyze(["client.pcap", "server.pcap.gz"], filter="port 443", start=30, end=45)
    t.findings.to_pandas()                        # kind, culprit, time lost, evidence…
    t.exchanges                                   # one row per request/response, budget parts as columns

Inputs are read as `tcpdoctor analyze` reads them: gzip and zstd captures,
directories of (rotated) captures, several captures merged by time; ``filter``,
``start`` and ``end`` select packets as ``--filter``, ``--from`` and ``--to`` do.
The tables and their columns are those `tcpdoctor analyze --parquet` writes
(see the README, "Tables: Parquet and Arrow"). The analysis runs without the
GIL, so a thread pool analyses several captures at once; it also runs inside
Spark's ``mapInArrow``, Ray Data's ``map_batches`` or a process pool.
"""

import os
from typing import NamedTuple, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.ipc

from . import _native

__all__ = ["analyze", "Tables", "CaptureError", "TABLE_SCHEMA", "__version__"]

TABLE_SCHEMA = _native.TABLE_SCHEMA
__version__ = _native.__version__


class CaptureError(ValueError):
    """The input is not a capture tcpdoctor can read (nothing was analysed)."""


class Tables(NamedTuple):
    connections: pa.Table
    exchanges: pa.Table
    findings: pa.Table
    files: pa.Table
    status: str
    error: Optional[str]


Path = Union[str, "os.PathLike[str]"]
Time = Union[str, int, float]


def _time(t: Optional[Time]) -> Optional[str]:
    """A time as ``--from``/``--to`` take it; numbers are seconds after the first packet."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"a time is a str, int or float, not {type(t).__name__}")
    return str(t) if isinstance(t, int) else f"{t:.9f}"


def analyze(
    capture: Union[Path, Sequence[Path], bytes, bytearray, memoryview],
    *,
    filter: Optional[str] = None,
    start: Optional[Time] = None,
    end: Optional[Time] = None,
    host: Optional[str] = None,
    file: Optional[str] = None,
    max_open_connections: Optional[int] = None,
) -> Tables:
    """Analyses pcap or pcapng captures: a path, a list of paths, or one capture's bytes.

    Plain, gzip or zstd captures are read (told by their content). A
    directory stands for the captures in it (rotated ``tcpdump -C/-G``
    files included); several captures are merged by time into one
    analysis, and a connection captured at two places (client and server)
    is analysed once, as ``tcpdoctor analyze A B DIR`` does.

    ``filter`` keeps only the packets a tcpdump-like filter matches
    (``"port 443 and host 10.0.0.2"``); ``start`` and ``end`` bound the
    time analysed, both included: seconds after the first packet (``2.5``),
    a Unix time (``"@1700000000"``) or a UTC time (``"2026-11-24T08:01:02Z"``,
    ``"08:01:02"``). Packets left out are not analysed at all, as with
    ``--filter``, ``--from`` and ``--to``; a bad filter or time raises ValueError.

    ``host`` and ``file`` fill the tables' ``host`` and ``file`` columns
    (defaults: the capture's directory name and its path, for several
    captures "FIRST and N more"; for bytes, "" and "<bytes>"). Returns the
    four tables and the status: "ok", or "partial" when a capture breaks
    part way (``error`` says where; what came before is analysed). Raises
    CaptureError when nothing could be read and OSError when a file cannot
    be opened.
    """
    if isinstance(capture, (bytes, bytearray, memoryview)):
        data = bytes(capture)
        name = "<bytes>" if file is None else file
        where = "" if host is None else host
    else:
        if isinstance(capture, (str, os.PathLike)):
            paths = [os.fspath(capture)]
        else:
            paths = [os.fspath(p) for p in capture]
        if not paths:
            raise ValueError("no capture given")
        data = paths
        name, where = file, host
        if len(paths) == 1 and not os.path.isdir(paths[0]):
            name = paths[0] if file is None else file
            where = host if host is not None else os.path.basename(
                os.path.dirname(os.path.abspath(paths[0])))
    status, error, streams = _native.analyze(data, name, where, max_open_connections,
                                             filter, _time(start), _time(end))
    if status == "failed":
        raise CaptureError(f"{name or paths[0]}: {error}")
    tables = {k: pa.ipc.open_stream(v).read_all() for k, v in streams.items()}
    return Tables(tables["connections"], tables["exchanges"], tables["findings"],
                  tables["files"], status, error)
