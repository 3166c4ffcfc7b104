"""Sequential stopping, all of it (docs/metrics.md, "Sequential stopping"); the scenario's
``stop:`` settings are speedbench/scenario/stopping.py.

- schedule.py the look schedule, the look level, the send order (light: the dry-run uses them)
- looks.py    the statistics: each look's intervals, the rule
- point.py    one round of one point on the run path: its batches, the decision after each look,
              the baseline's records read as they grow (each look reads only the new ones)
- batches.py  a point sent in batches that end at the looks, scrapes around all of them
- summary.py  summary.json's ``stopping`` block (the look-level widening is in metrics/formulas.py)

Import the submodules; this file imports nothing, so the summary side does not load the
load generator.
"""
