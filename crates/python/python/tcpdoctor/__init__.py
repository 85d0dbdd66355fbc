"""tcpdoctor for Python: why TCP requests are slow, as pyarrow tables.

    import tcpdoctor
    t = tcpdoctor.analyze("capture.pcap")        # or the capture's bytes
    t.findings.to_pandas()                        # kind, culprit, time lost, evidence…
    t.exchanges                                   # one row per request/response, budget parts as columns

The tables and their columns are those `tcpdoctor analyze --parquet` writes
(see the README, "Tables: Parquet and Arrow"). The analysis runs without the
GIL, so a thread pool analyses several captures at once; it also runs inside
Spark's ``mapInArrow``, Ray Data's ``map_batches`` or a process pool.
"""

import os
from typing import NamedTuple, Optional, Union

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


def analyze(
    capture: Union[str, "os.PathLike[str]", bytes, bytearray, memoryview],
    *,
    host: Optional[str] = None,
    file: Optional[str] = None,
    max_open_connections: Optional[int] = None,
) -> Tables:
    """Analyses one pcap or pcapng capture: a path, or its bytes.

    ``host`` and ``file`` fill the tables' ``host`` and ``file`` columns
    (defaults: the capture's directory name and its path; for bytes, ""
    and "<bytes>"). Returns the four tables and the capture's status:
    "ok", or "partial" when it breaks part way (``error`` says where; what
    came before is analysed). Raises CaptureError when nothing could be read
    and OSError when the file cannot be opened.
    """
    if isinstance(capture, (bytes, bytearray, memoryview)):
        data = bytes(capture)
        name = "<bytes>" if file is None else file
        where = "" if host is None else host
    else:
        data = os.fspath(capture)
        name = data if file is None else file
        where = host if host is not None else os.path.basename(
            os.path.dirname(os.path.abspath(data)))
    status, error, streams = _native.analyze(data, name, where, max_open_connections)
    if status == "failed":
        raise CaptureError(f"{name}: {error}")
    tables = {k: pa.ipc.open_stream(v).read_all() for k, v in streams.items()}
    return Tables(tables["connections"], tables["exchanges"], tables["findings"],
                  tables["files"], status, error)
