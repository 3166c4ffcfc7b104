"""The client side of one request: the streaming HTTP client, the parsers of what vLLM
sends back, and the Prometheus scrape. Import the submodules themselves.

- http.py          aiohttp streaming client; raw perf_counter_ns stamps only
- spec_payload.py  the usage chunk and per-request spec-decode stats (both vLLM shapes) -> SpecStats
- scrape.py        Prometheus text parser and spec-decode counter deltas
"""
