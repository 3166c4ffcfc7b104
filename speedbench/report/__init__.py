"""Everything that turns run folders into something to read: the terminal table,
report.md / report.html, comparisons, CI gates and the static dashboard. It only reads
run folders; the live view during a run is :mod:`speedbench.run.live`.

Submodules import matplotlib and rich lazily where they can, so ``speedbench run``
pays for them only when the run ends.

report.md and report.html come from :mod:`speedbench.report.render`: one report model
(:mod:`speedbench.report.model`) rendered by markdown.py and html.py; terminal.py prints
the same model's head, speedups and warnings.
"""
