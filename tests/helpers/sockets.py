"""Unix sockets that vLLM (and the fake, which binds one as vLLM does) would leave directly
in the system temporary folder: named by a uuid4. Other programs' sockets there are not
counted, and a server's own folder (VLLM_RPC_BASE_PATH) is a subfolder, so its sockets
are not either."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def tmp_sockets() -> set[Path]:
    return {p for p in Path(tempfile.gettempdir()).iterdir() if p.is_socket() and UUID.fullmatch(p.name)}


def tmp_dist_files() -> set[Path]:
    """vLLM's distributed-init files (``vllm_dist_<uuid hex>``) directly in the system
    temporary folder: a server's own TMPDIR (a subfolder, removed with it) holds them now."""
    return {p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("vllm_dist_")}
