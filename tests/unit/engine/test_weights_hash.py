"""The draft weights' content hash (engine/vllm/weights_hash.py) and its place in the
draft's provenance: a retrained checkpoint at the same path with the same config.json is
told apart from last night's."""

from __future__ import annotations

import json
import os
from pathlib import Path

from speedbench.engine.vllm.provenance import draft_info
from speedbench.engine.vllm.weights_hash import weights_digest


def checkpoint(folder: Path, shards: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    (folder / "tokenizer.json").write_text("{}")  # not a weight: never hashed
    for name, data in shards.items():
        (folder / name).write_bytes(data)
    return folder


def test_same_weights_same_hash_and_any_changed_byte_changes_it(tmp_path):
    a = checkpoint(tmp_path / "a", {"model.safetensors": b"\x01" * 5000})
    b = checkpoint(tmp_path / "b", {"model.safetensors": b"\x01" * 5000})
    digest, size = weights_digest(a)
    assert len(digest) == 64 and size == 5000
    assert weights_digest(b) == (digest, 5000)
    (b / "tokenizer.json").write_text('{"changed": true}')
    assert weights_digest(b)[0] == digest  # only weight files count
    (b / "model.safetensors").write_bytes(b"\x01" * 4999 + b"\x02")  # retrained, same size
    os.utime(b / "model.safetensors", ns=(1, 1))  # and a different mtime: the cache key moves
    assert weights_digest(b)[0] != digest


def test_shard_names_and_boundaries_count(tmp_path):
    one = checkpoint(tmp_path / "one", {"a.safetensors": b"xy", "b.safetensors": b"z"})
    moved = checkpoint(tmp_path / "moved", {"a.safetensors": b"x", "b.safetensors": b"yz"})
    renamed = checkpoint(tmp_path / "renamed", {"a.safetensors": b"xy", "c.safetensors": b"z"})
    digests = {weights_digest(f)[0] for f in (one, moved, renamed)}
    assert len(digests) == 3


def test_no_weights_no_hash(tmp_path):
    assert weights_digest(checkpoint(tmp_path / "cfg-only", {})) == ("", 0)
    assert weights_digest(tmp_path / "absent") == ("", 0)


def test_draft_info_hashes_the_weights_through_hub_cache_symlinks(tmp_path, monkeypatch):
    local = checkpoint(tmp_path / "local", {"model.safetensors": b"weights" * 100})
    repo = tmp_path / "hub" / "models--org--draft"
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"weights" * 100)
    snap = checkpoint(repo / "snapshots" / "rev1", {})
    (snap / "model.safetensors").symlink_to(blob)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("rev1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    direct, cached = draft_info(str(local), "eagle3"), draft_info("org/draft", "eagle3")
    assert direct["weights_sha256"] == cached["weights_sha256"] != ""
    assert direct["weights_bytes"] == cached["weights_bytes"] == 700
    missing = draft_info("org/absent", "eagle3")
    assert missing["weights_sha256"] == "" and missing["weights_bytes"] == 0
