"""The client side of one request: the streaming HTTP client (plain OpenAI, plus what the
run's engine adds to the stream) and the Prometheus scrape. Import the submodules themselves.
Nothing here names an engine: the engine's fields and counter names are engine/<name>/'s.

- http.py        aiohttp streaming client; raw perf_counter_ns stamps only
- extensions.py  StreamExtensions: the engine's request fields (token ids, length, usage) and figures
- scrape.py      Prometheus text parser, the /metrics scrape, spec-decode counter deltas
"""
