#!/usr/bin/env python3
"""A fleet sweep on Spark: which server endpoints lose the most time, to what, on which host?

    python examples/fleet/sweep.py CAPTURES/            # local mode, all cores
    python examples/fleet/sweep.py CAPTURES/ --master local[2] --json ranking.json
    spark-submit examples/fleet/sweep.py hdfs-or-nfs/CAPTURES --master spark://head:7077

CAPTURES holds one folder per host (CAPTURES/web-1/*.pcap, CAPTURES/db-2/*.pcapng …);
the folder name is the host. Each capture is analysed by the `tcpdoctor` Python
package inside Spark's mapInArrow (every executor needs the package installed and
the captures on a path it can read), and Spark SQL ranks, per host, the endpoints
by the time each cause cost them — the same question examples/fleet/ranking.sql
asks DuckDB over the tables `tcpdoctor analyze --parquet` writes.

Endpoints are the findings' culprits: the server endpoint for server and network
causes, the client address (IP:*) for client-side ones. A capture that cannot be
read is listed with its error and skipped; the sweep goes on.
"""

import argparse
import json
import os
import sys
import time

CAPTURE_ENDINGS = (".pcap", ".pcapng", ".cap")

# One row per capture (row = "file") and one per finding (row = "finding").
ROWS_SCHEMA = (
    "row string, host string, file string, status string, error string, "
    "packets long, bytes long, seconds double, "
    "kind string, endpoint string, role string, lost_ms double, occurrences long"
)


def captures(root):
    """(path, host) for every capture under root: the host is its folder's name."""
    out = []
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.lower().endswith(CAPTURE_ENDINGS):
                path = os.path.join(d, f)
                out.append((os.path.abspath(path), os.path.basename(os.path.abspath(d))))
    out.sort()
    return out


def analyse_partition(batches):
    """mapInArrow: batches of (path, host) in, file and finding rows out."""
    import pyarrow as pa
    import tcpdoctor

    names = [f.split()[0] for f in ROWS_SCHEMA.split(", ")]
    for batch in batches:
        rows = {n: [] for n in names}

        def add(**kw):
            for n in names:
                rows[n].append(kw.get(n))

        for path, host in zip(batch.column("path").to_pylist(), batch.column("host").to_pylist()):
            t0 = time.perf_counter()
            size = os.path.getsize(path) if os.path.exists(path) else 0
            try:
                t = tcpdoctor.analyze(path, host=host)
            except (tcpdoctor.CaptureError, OSError) as e:
                add(row="file", host=host, file=path, status="failed", error=str(e),
                    packets=0, bytes=size, seconds=time.perf_counter() - t0)
                continue
            f = t.files.to_pylist()[0]
            add(row="file", host=host, file=path, status=t.status, error=t.error,
                packets=f["packets"], bytes=size, seconds=time.perf_counter() - t0)
            for r in t.findings.select(["kind", "culprit_endpoint", "culprit_role",
                                        "total_delay_ms", "occurrences"]).to_pylist():
                add(row="finding", host=host, file=path, kind=r["kind"],
                    endpoint=r["culprit_endpoint"], role=r["culprit_role"],
                    lost_ms=r["total_delay_ms"], occurrences=r["occurrences"])
        yield pa.RecordBatch.from_pydict(rows)


RANKING_SQL = """
SELECT host, endpoint, role, kind,
       ROUND(SUM(lost_ms), 1)  AS lost_ms,
       SUM(occurrences)        AS occurrences,
       COUNT(DISTINCT file)    AS captures,
       RANK() OVER (PARTITION BY host ORDER BY SUM(lost_ms) DESC) AS rank
FROM rows WHERE row = 'finding'
GROUP BY host, endpoint, role, kind
ORDER BY host, rank, endpoint, kind
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="directory with one folder of captures per host")
    ap.add_argument("--master", default="local[*]",
                    help="Spark master: local[N] (N worker threads), spark://HOST:7077, yarn …")
    ap.add_argument("--partitions", type=int, default=0,
                    help="tasks to split the captures into (default: 4 per core)")
    ap.add_argument("--top", type=int, default=5, help="rows shown per host")
    ap.add_argument("--json", metavar="OUT", help="also write the ranking and the sweep's figures as JSON")
    args = ap.parse_args()

    caps = captures(args.root)
    if not caps:
        sys.exit(f"no capture under {args.root} (looked for {', '.join(CAPTURE_ENDINGS)})")

    if args.master.startswith("local"):
        # Local workers run this interpreter (the one with tcpdoctor installed).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("tcpdoctor-fleet")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    parts = args.partitions or min(len(caps), 4 * cores)
    paths = spark.createDataFrame(caps, "path string, host string").repartition(parts)

    t0 = time.perf_counter()
    rows = paths.mapInArrow(analyse_partition, ROWS_SCHEMA).cache()
    files = [r.asDict() for r in rows.filter("row = 'file'").collect()]
    sweep_s = time.perf_counter() - t0
    rows.createOrReplaceTempView("rows")
    ranking = [r.asDict() for r in spark.sql(RANKING_SQL).collect()]
    spark.stop()

    failed = [f for f in files if f["status"] == "failed"]
    packets = sum(f["packets"] for f in files)
    size = sum(f["bytes"] for f in files)
    for f in failed:
        print(f"skipped: {f['error']}", file=sys.stderr)
    print(f"{len(files)} captures from {len({f['host'] for f in files})} hosts on {args.master} "
          f"({cores} cores, {parts} tasks): {sweep_s:.2f} s, {len(files) / sweep_s:.1f} captures/s, "
          f"{packets / sweep_s:,.0f} packets/s, {size / sweep_s / 1e6:.1f} MB/s; "
          f"{len(failed)} not readable")
    print()
    print(f"{'host':<14} {'#':>2}  {'endpoint':<22} {'role':<8} {'cause':<24} {'time lost':>11} {'count':>7} {'captures':>8}")
    for r in ranking:
        if r["rank"] <= args.top:
            print(f"{r['host']:<14} {r['rank']:>2}  {r['endpoint']:<22} {r['role']:<8} {r['kind']:<24} "
                  f"{r['lost_ms'] / 1e3:>9.2f} s {r['occurrences']:>7} {r['captures']:>8}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"master": args.master, "cores": cores, "captures": len(files),
                       "failed": [{"file": f["file"], "error": f["error"]} for f in failed],
                       "packets": packets, "bytes": size, "seconds": round(sweep_s, 3),
                       "ranking": ranking}, out, indent=1)


if __name__ == "__main__":
    main()
