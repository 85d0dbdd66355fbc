-- Per host, the endpoints ranked by the time each cause cost them: the question
-- examples/fleet/sweep.py asks Spark, over the tables `analyze --parquet` writes.
--   tcpdoctor analyze CAPTURES/ --parquet tables/
--   cd tables && duckdb < ../examples/fleet/ranking.sql      (or duckdb.sql() in Python)
SELECT host,
       culprit_endpoint                AS endpoint,
       culprit_role                    AS role,
       kind,
       ROUND(SUM(total_delay_ms), 1)   AS lost_ms,
       SUM(occurrences)                AS occurrences,
       COUNT(DISTINCT file)            AS captures,
       RANK() OVER (PARTITION BY host ORDER BY SUM(total_delay_ms) DESC) AS rank
FROM 'findings.parquet'
GROUP BY host, culprit_endpoint, culprit_role, kind
ORDER BY host, rank, endpoint, kind;
