"""Property-based tests (hypothesis) of the parsers that meet real servers, proxies and
editors: the SSE stream parser, the spec-decode payload parser, the Prometheus text
parser and the scenario loader. Arbitrary input never crashes them (a clear error, a
recorded error kind, or a skipped line); well-formed input is never lost; where the
input arrives in pieces, the split points do not change the parse.

CI is deterministic: tests/conftest.py loads a derandomized hypothesis profile.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from speedbench.client.sse import consume as _consume  # noqa: E402
from speedbench.client.scrape import parse_prometheus  # noqa: E402
from speedbench.client.extensions import read_usage  # noqa: E402
from speedbench.engine.vllm import VllmEngine  # noqa: E402
from speedbench.engine.vllm.payload import parse_spec  # noqa: E402
from speedbench.errors import ScenarioError  # noqa: E402
from speedbench.records import RequestRecord, SpecStats  # noqa: E402
from speedbench.scenario import load_scenario  # noqa: E402

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

# ---- SSE: client/http.py _consume --------------------------------------------------------


class _Content:
    """What _consume reads: aiohttp's StreamReader, reduced to iter_any()."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = pieces

    async def iter_any(self):
        for p in self.pieces:
            yield p


def consume(pieces: list[bytes]) -> RequestRecord:
    rec = RequestRecord(arm="a", concurrency=1, prompt_index=0, prompt_id="p")
    asyncio.run(_consume(_Content(pieces), rec, stream=VllmEngine()))
    return rec


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:]) if b > a]


def sse(tokens: list[str], *, chat: bool, ids: bool) -> bytes:
    out = []
    for i, t in enumerate(tokens):
        choice = {"index": 0, "delta": {"content": t}} if chat else {"index": 0, "text": t}
        if ids:
            choice["token_ids"] = [i]
        out.append(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
    usage = {"prompt_tokens": 3, "completion_tokens": len(tokens)}
    out.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
    return b"".join(out) + b"data: [DONE]\n\n"


@given(tokens=st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=20), chat=st.booleans(),
       ids=st.booleans(), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_sse_split_points_do_not_change_the_parse(tokens, chat, ids, cuts):
    data = sse(tokens, chat=chat, ids=ids)
    whole, pieces = consume([data]), consume(split(data, cuts))
    assert whole.error is None and pieces.error is None
    assert pieces.output_text == whole.output_text == "".join(tokens)  # no token lost
    assert pieces.chunk_tokens == whole.chunk_tokens and sum(pieces.chunk_tokens) == len(tokens)
    assert len(pieces.chunk_ns) == len(pieces.chunk_tokens)
    assert pieces.output_tokens == len(tokens)


@given(pieces=st.lists(st.binary(max_size=64), max_size=8))
def test_sse_arbitrary_bytes_never_crash(pieces):
    rec = consume(pieces)
    assert rec.error in (None, "malformed_sse", "truncated", "http_status")
    assert len(rec.chunk_ns) == len(rec.chunk_tokens) and rec.t_end_ns


@given(events=st.lists(json_values, max_size=6))
def test_sse_arbitrary_json_events_never_crash(events):
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    rec = consume([data])
    assert rec.error in (None, "malformed_sse", "http_status")


# ---- spec-decode payloads: engine/vllm/payload.py, through the client's usage reader -----------


@given(payload=json_values)
def test_spec_payload_arbitrary_is_stats_none_or_a_clear_error(payload):
    try:
        out = parse_spec(payload)
    except (TypeError, ValueError):
        return
    assert out is None or isinstance(out, SpecStats)


@given(usage=json_values.filter(bool), metrics=json_values)  # the client calls it only with a usage
def test_usage_chunk_arbitrary_never_crashes(usage, metrics):
    rec = RequestRecord(arm="a", concurrency=1, prompt_index=0, prompt_id="p")
    read_usage({"metrics": metrics}, usage, rec, VllmEngine())


@given(hist=st.lists(st.integers(0, 1000), min_size=1, max_size=8), dense=st.booleans())
def test_spec_histogram_counts_add_up(hist, dense):
    raw = hist if dense else {str(j): v for j, v in enumerate(hist) if v}
    out = parse_spec({"acceptance_histogram": raw})
    if sum(hist) == 0 and not dense:
        return  # an empty sparse histogram carries nothing
    assert out.num_spec_steps == sum(hist)
    assert out.num_accepted_tokens == sum(j * v for j, v in enumerate(hist))


# ---- Prometheus text: client/scrape.py ---------------------------------------------------


@given(text=st.text(max_size=400))
def test_prometheus_arbitrary_text_never_crashes(text):
    parse_prometheus(text)


label_values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(series=st.lists(st.tuples(st.sampled_from(["0", "1", "2"]), label_values,
                                 st.floats(0, 1e12, allow_nan=False)),
                       min_size=1, max_size=6, unique_by=lambda s: s[0]))
def test_prometheus_round_trips_through_prometheus_client(series):
    pc = pytest.importorskip("prometheus_client")
    reg = pc.CollectorRegistry()
    c = pc.Counter("vllm:spec_decode_num_accepted_tokens", "accepted", ["engine", "model_name"], registry=reg)
    for engine, model, v in series:
        c.labels(engine, model).inc(v)
    parsed = parse_prometheus(pc.generate_latest(reg).decode())
    got = {(lab["engine"], lab["model_name"]): v for lab, v in parsed["vllm:spec_decode_num_accepted_tokens_total"]}
    want = {(e, m): v for e, m, v in series}
    assert got.keys() == want.keys()
    assert all(math.isclose(got[k], want[k], rel_tol=1e-15) for k in want)


@given(lines=st.lists(st.text(max_size=60).filter(lambda s: "\n" not in s and "\r" not in s), max_size=6))
def test_prometheus_garbage_lines_do_not_lose_good_ones(lines):
    good = 'vllm:spec_decode_num_drafts_total{engine="0"} 42.0'
    parsed = parse_prometheus("\n".join([*lines, good, *lines]) + "\n")
    assert ({"engine": "0"}, 42.0) in parsed["vllm:spec_decode_num_drafts_total"]


# ---- the scenario loader: scenario/load.py -----------------------------------------------


@given(text=st.text(max_size=300))
def test_scenario_loader_arbitrary_text_is_a_scenario_or_a_clear_error(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("sc") / "s.yaml"
    p.write_text(text)
    try:
        load_scenario(p)
    except ScenarioError as e:
        assert str(e)


@given(data=st.dictionaries(st.sampled_from(["name", "server", "arms", "workload", "concurrency", "repeats",
                                             "gates", "load", "x"]), json_values, max_size=6))
def test_scenario_loader_arbitrary_structures_are_a_clear_error(tmp_path_factory, data):
    import yaml

    p = tmp_path_factory.mktemp("sc") / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    try:
        load_scenario(p)
    except ScenarioError as e:
        assert str(e)
