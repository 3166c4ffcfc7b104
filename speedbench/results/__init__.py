"""The run folder: incremental record writes, summary files, resume state, loading.

- rundir.py   RunDir, the write side (layout, record log, points, summary.json)
- formats.py  summary.csv and records.parquet, written with every summary (the write side)
- summary.py  run folder -> summary.json/csv, Parquet (recomputed from the files)
- run.py      Run, the read model reports use; open_run_dir
- loader.py   load_run: a run folder as a Run with the engine that ran it (the one lookup of a saved engine)
- exports.py  ``speedbench export``: a loaded Run as vLLM JSON, CSV, Parquet or JSON
- files.py    atomic writes, run ids, safe file names

Layout (see docs/results.md)::

    results/<scenario>/<YYYYmmddTHHMMSSZ>-<6 hex>/
      scenario.resolved.yaml  provenance.json  records.jsonl  points.json
      prometheus/<arm>__c<conc>__<variant>__{before,after}.txt   logs/<arm>.log
      summary.json  summary.csv  records.parquet  report.md  report.html

Records are appended and flushed one line at a time as each request completes, so a
crash loses at most the line being written; every other file is replaced atomically
(write to a temporary name, then rename), so a reader never sees half a JSON file.
"""

from speedbench.results.files import atomic_write, atomic_write_with, new_run_id
from speedbench.results.rounds import POINT_STATUSES, RESUMABLE_DONE
from speedbench.results.rundir import SCHEMA_VERSION, RunDir
from speedbench.results.run import Run

__all__ = ["POINT_STATUSES", "RESUMABLE_DONE", "SCHEMA_VERSION", "Run", "RunDir", "atomic_write",
           "atomic_write_with", "new_run_id"]
