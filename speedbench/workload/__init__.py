"""Workloads: which prompts a run sends, in which order, and which ones warm the server up.

Every source yields :class:`~speedbench.records.Prompt` rows; every arm of a scenario
gets the same prompts in the same order. See docs/workloads.md.

- base.py           Source (what a source is), Workload, SourceCheck
- sources.py        the sources by ``workload.source``, one module each:
  speed_bench.py    SPEED-Bench (hub or a local copy); sample.py the bundled sample;
  jsonl.py          a JSONL file; random_tokens.py random tokens (opt-in)
- speed_bench_rows.py  a SPEED-Bench row -> Prompt (the sample and JSONL read rows with it too)
- select.py         filters, placeholders refused, the seeded order, warmup prompts
- load.py           load_workload: the one loading path (read, select, cap, warmup);
                    count_prompts: the dry-run's count where it is one local file's read
- check.py          the doctor's check of a source and its provenance fingerprint
- chat.py, padding.py  building requests from prompts (RequestBuilder)
"""

from speedbench.workload.base import Source, SourceCheck, Workload, tag
from speedbench.workload.check import check_source, source_fingerprint
from speedbench.workload.load import count_prompts, load_workload, read_source
from speedbench.workload.select import filter_prompts, seeded_order, split_warmup
from speedbench.workload.sources import config_for
from speedbench.workload.speed_bench import PLACEHOLDER_PREFIX, is_placeholder

__all__ = [
    "PLACEHOLDER_PREFIX", "Source", "SourceCheck", "Workload", "check_source", "config_for", "filter_prompts",
    "count_prompts", "is_placeholder", "load_workload", "read_source", "seeded_order", "source_fingerprint",
    "split_warmup", "tag",
]
