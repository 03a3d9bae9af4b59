"""Chronik load-test reports: results directories in, Markdown (and PNG charts) out.

Layout (load -> tidy -> summarise, each step small pure functions):

- ``load``          read one ``results/<run-id>/`` directory into raw objects and frames
- ``tidy``          long-format frames, one observation per row, ``run_id`` on each
- ``latency``       HdrHistogram ``.hlog`` decoding and merging; percentiles of raw load-generator samples
- ``summarise``     per-test throughput/latency/thresholds pooled over load generators, progression,
                    acks and broker comparisons, end-to-end latency
- ``capacity``      find-max: the max sustainable rate from the staircase's steps
- ``regression``    whether two sets of runs differ beyond run-to-run noise
- ``verification``  the consumers' verdict line, ingestor ledgers
- ``resources``     CPU cores and RSS per process and component, msg/s per core, CPU µs/msg
- ``sizing``        the costliest tier per message; cores and pods a target rate would take (linear projection)
- ``broker``        key broker figures from Prometheus snapshots
- ``events``        events the run's driver caused (k8s --delete-pod) on the load timeline
- ``faults``        scheduled faults (run-all.sh --faults): per-second timeline and each fault's recovery figures
- ``report``        ``build_report``: every table of a report, its notes and conclusions
- ``render``        the report as Markdown
- ``charts``        the report's charts (matplotlib figures, PNG files)

CLI: ``python -m reports render RESULTS_DIR... -o report.md``.
"""

from .charts import write_charts
from .load import Run, load_run, load_runs
from .render import render_markdown
from .report import Report, build_report

__all__ = ["Report", "Run", "build_report", "load_run", "load_runs", "render_markdown", "write_charts"]
