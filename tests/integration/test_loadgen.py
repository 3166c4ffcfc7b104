"""Closed-loop runner against the fake server: concurrency, warmup, order, multi-turn, aborts."""

from __future__ import annotations

import asyncio

import pytest
from tests.helpers.fakes import FakeBuilder, VLLM, fake_server, max_overlap, prompts

from speedbench.client.http import ClientConfig
from speedbench.loadgen import PointJob, Target, run_pass
from speedbench.records import PointKey
from speedbench.testing import FakeConfig, Fault
from speedbench.testing.script import prompt_text


@pytest.fixture(scope="module")
def srv():
    with fake_server() as s:
        yield s


@pytest.fixture
def lone():
    """A fake of its own, for a test that abandons streams (an abort, Ctrl-C): a request it
    sent but the fake has not yet read would otherwise reach the shared fake after the next
    test's reset and count in that test's log and concurrency."""
    with fake_server(t_step_s=0.004, output_tokens=8) as s:
        yield s


@pytest.fixture(autouse=True)
def _fresh(srv):
    srv.config = FakeConfig(t_step_s=0.004, output_tokens=8)
    srv.reset()


def _run(srv, ps, builder=None, *, concurrency, warmup=(), on_record=None, server_alive=None, before_measure=None):
    """One pass of arm "a" at ``concurrency`` (a key of its own: :func:`_run_key`)."""
    return _run_key(srv, PointKey("a", concurrency), ps, builder, warmup=warmup, on_record=on_record,
                    server_alive=server_alive, before_measure=before_measure)


def _run_key(srv, key, ps, builder=None, *, warmup=(), on_record=None, server_alive=None, before_measure=None):
    target = Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=builder or FakeBuilder(),
                    server_alive=server_alive, on_record=on_record)
    job = PointJob(key=key, prompts=ps, warmup=warmup)
    return asyncio.run(run_pass(target, job, 0, before_measure=before_measure))


@pytest.mark.parametrize("conc", [1, 4, 16])
def test_exactly_n_in_flight(srv, conc):
    res = _run(srv, prompts(3 * conc), concurrency=conc)
    assert len(res.records) == 3 * conc and all(r.ok for r in res.records)
    # exactly N in flight as the client sent them; the server never saw more. Whether it saw
    # all N at once depends on how fast the host lets them arrive, not on the client.
    assert max_overlap(res.records) == conc
    assert srv.max_concurrent <= conc
    assert res.wall_s > 0 and set(res.loop_lag_ms) == {"p50", "p99", "max"} and res.aborted is None


def test_fewer_prompts_than_concurrency(srv):
    res = _run(srv, prompts(3), concurrency=8)
    assert len(res.records) == 3 and max_overlap(res.records) == 3 and srv.max_concurrent <= 3


def test_warmup_is_separate_and_excluded(srv):
    seen = []
    scraped_at = []

    async def before():
        scraped_at.append(len(srv.log))

    res = _run(srv, prompts(4), concurrency=2, warmup=prompts(2, prefix="w"), on_record=seen.append,
               before_measure=before)
    # the two warmup requests run side by side: either may finish first (a --busy run beside
    # the main job saw w1 first), so their records are compared as a set
    assert sorted(r.prompt_id for r in res.warmup_records) == ["w0", "w1"]
    assert all(r.warmup for r in res.warmup_records)
    assert sorted(r.prompt_id for r in res.records) == ["p0", "p1", "p2", "p3"]
    assert not any(r.warmup for r in res.records)
    assert seen == res.records  # on_record got each measured record, in completion order, and no warmup
    assert scraped_at == [2]  # before_measure ran after both warmup requests, before any measured one
    first_user = [e.body["messages"][0]["content"] for e in srv.log]
    assert sorted(first_user[:2]) == ["question w0 turn 0", "question w1 turn 0"] and len(first_user) == 6


def test_identical_prompt_order_across_arms(srv):
    ps = prompts(10)
    orders = []
    for arm in ("base", "sd"):
        res = _run_key(srv, PointKey(arm, 3), ps)
        by_queue = sorted(res.records, key=lambda r: r.t_queued_ns)
        orders.append([r.prompt_index for r in by_queue])
        assert all(r.prompt_id == ps[r.prompt_index].id for r in res.records)
    assert orders[0] == orders[1] == list(range(10))


def test_multiturn_history_grows_in_one_slot(srv):
    b = FakeBuilder()
    res = _run(srv, prompts(2, turns=3), builder=b, concurrency=1)
    assert [(r.prompt_index, r.turn) for r in res.records] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [len(h) for _, _, h in b.calls] == [0, 1, 2, 0, 1, 2]
    # the answer fed back is what the model said in the previous turn
    r0, r1 = res.records[0], res.records[1]
    assert b.calls[1][2] == [("question p0 turn 0", r0.output_text)] and r0.output_text
    # found by its text, not its place in the shared fake's log: on a loaded host a stream an
    # earlier test abandoned can reach the fake after this test's reset and take a place
    msgs = next(e.body["messages"] for e in srv.log if prompt_text(e.body) == "question p0 turn 2")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[3]["content"] == r1.output_text
    assert r1.t_queued_ns >= r0.t_end_ns  # the next turn waits for the previous answer


def test_failed_turn_ends_the_conversation(srv):
    srv.config = FakeConfig(t_step_s=0.002, output_tokens=4, faults={1: Fault("http_500")})
    res = _run(srv, prompts(1, turns=3), concurrency=1)
    assert [(r.turn, r.error) for r in res.records] == [(0, None), (1, "http_status")]


def test_server_death_aborts_the_point(lone):
    lone.config = FakeConfig(t_step_s=0.05, output_tokens=200)
    seen = []

    def alive():
        # dies once the fake has written 3 chunks on each of the 4 streams (not at a fixed
        # time: a busy host may not have started them all by then)
        log = lone.log
        started = len(log) == 4 and all(len(e.emit_ns) >= 3 for e in log)
        return "server exited with code 137" if started else None

    res = _run(lone, prompts(20), concurrency=4, server_alive=alive, on_record=seen.append)
    assert res.aborted == "server exited with code 137"
    assert len(res.records) == 4 and seen == res.records  # only the 4 in flight; nothing else dispatched
    assert all(r.error == "server_died" and r.error_detail == res.aborted for r in res.records)
    # partial streams are kept, and cut short: the pass did not wait for the 10 s requests
    # (the cut, not a wall-clock bound, shows it; a busy host may take any time to get there)
    assert all(r.chunk_ns and sum(r.chunk_tokens) < 200 for r in res.records)
    assert len(lone.log) == 4


def test_async_server_alive_and_abort_during_warmup(lone):
    lone.config = FakeConfig(t_step_s=0.05, output_tokens=200)

    async def alive():
        return "gone"

    res = _run(lone, prompts(3), concurrency=2, warmup=prompts(2, prefix="w"), server_alive=alive)
    assert res.aborted == "gone" and res.records == []
    assert all(r.error == "server_died" for r in res.warmup_records)


def test_ctrl_c_keeps_completed_records(lone):
    lone.config = FakeConfig(t_step_s=0.01, output_tokens=10)
    seen = []

    async def go():
        target = Target(client=ClientConfig(lone.base_url, stream=VLLM), builder=FakeBuilder(), on_record=seen.append)
        task = asyncio.create_task(run_pass(target,
                                            PointJob(key=PointKey("a", 2), prompts=prompts(50)), 0))
        while len(seen) < 4:  # cancel once some have finished, however slow the host
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    done = [r for r in seen if r.ok]
    cancelled = [r for r in seen if r.error == "cancelled"]
    assert len(done) >= 4 and len(cancelled) == 2
    assert all(r.output_tokens == 10 for r in done)


def test_measure_orders_warmup_scrape_repeats_scrape(srv):
    """measure(): warmup, a settled scrape, every repeat, a settled scrape; a scrape that
    fails because the server died aborts the point with the death as the reason."""
    from speedbench.errors import ServerError
    from speedbench.loadgen import measure

    scraped_at = []

    class Counting:
        settle_prefixes = VLLM.settle_prefixes

        async def scrape(self, base_url):
            scraped_at.append(len(srv.log))
            return "vllm:spec_decode_num_drafts_total 1\n"

    target = Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=FakeBuilder())
    m = asyncio.run(measure(target, PointJob(key=PointKey("a", 2), prompts=prompts(3), warmup=prompts(2, prefix="w"),
                                             repeats=2), Counting()))
    assert m.aborted is None and [r.records[0].repeat for r in m.repeats] == [0, 1]
    assert m.before and m.after and m.n_errors == 0 and m.wall_s > 0
    # two scrapes settle each snapshot: after warmup (2 requests), after both repeats (2 + 3 + 3)
    assert scraped_at == [2, 2, 8, 8]

    class Dead:
        settle_prefixes = VLLM.settle_prefixes

        async def scrape(self, base_url):
            raise ServerError("GET /metrics failed")

    dying = Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=FakeBuilder(),
                   server_alive=lambda: "exit code 1")
    m = asyncio.run(measure(dying, PointJob(key=PointKey("a", 2), prompts=prompts(3), warmup=prompts(1, prefix="w")),
                            Dead()))
    assert m.aborted == "exit code 1" and m.repeats[0].records == [] and m.before == ""
    with pytest.raises(ServerError):
        asyncio.run(measure(target, PointJob(key=PointKey("a", 1), prompts=prompts(1)), Dead()))
