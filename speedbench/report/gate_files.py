"""The gate's files: JUnit XML for CI (one testcase per check) and the Markdown summary
(a CI job summary). report/gate.py decides; this module only writes what it decided."""

from __future__ import annotations

import math
import re
import time
import xml.etree.ElementTree as ET
from typing import Any

from speedbench.report import tables
from speedbench.report.gate import GateResult, nothing_checked
from speedbench.report.markdown import md, md_table
from speedbench.results import Run


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(s: Any) -> str:
    """XML 1.0 forbids most control characters even escaped; messages may carry them."""
    return _XML_BAD.sub("?", str(s))


def junit_xml(results: list[GateResult], run: Run, elapsed_s: float = 0.0) -> str:
    n_fail = sum(r.status == "fail" for r in results)
    n_skip = sum(r.status == "skip" for r in results)
    counts = {"tests": str(len(results)), "failures": str(n_fail), "errors": "0", "skipped": str(n_skip),
              "time": f"{elapsed_s:.3f}"}
    root = ET.Element("testsuites", {"name": "speedbench gate", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": _x(f"{run.scenario_name} {run.run_id}"), **counts,
                                              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())})
    for r in results:
        tc = ET.SubElement(suite, "testcase", {"name": _x(r.name),
                                               "classname": _x(f"speedbench.gate{r.index}.{r.gate.metric}"),
                                               "time": "0"})
        if r.status == "fail":
            kind = "missing" if not math.isfinite(r.value) else "regression"
            ET.SubElement(tc, "failure", {"message": _x(r.message), "type": kind}).text = _x(
                f"{r.name}\nvalue: {r.value}\n{r.message}")
        elif r.status == "skip":
            ET.SubElement(tc, "skipped", {"message": _x(r.message)})
        else:
            ET.SubElement(tc, "system-out").text = _x(r.message)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def summary_markdown(results: list[GateResult], run: Run, baseline: Run | None = None) -> str:
    n_fail = sum(r.status == "fail" for r in results)
    n_skip = sum(r.status == "skip" for r in results)
    verdict = "FAILED" if n_fail else "NOTHING CHECKED" if nothing_checked(results, baseline) else "passed"
    head = [f"## speedbench gate {verdict}: {md(run.scenario_name)} `{md(run.run_id)}`", "",
            f"{len(results) - n_fail - n_skip} passed, {n_fail} failed, {n_skip} skipped"
            + (f"; baseline run `{md(baseline.run_id)}`" if baseline else "") + ".", ""]
    rows = [[r.status.upper(), r.gate.metric, r.bounds, r.arm or "–", "–" if r.concurrency is None else r.concurrency,
             r.variant or "", tables.fmt(r.value, 3), r.message]
            for r in sorted(results, key=lambda r: r.status != "fail")]
    return "\n".join(head) + md_table(["result", "metric", "rule", "arm", "c", "variant", "value", "details"], rows,
                                      "llllrlrl") + "\n"
