"""speedbench: reproduce speculative-decoding speedups on vLLM, with honest error bars."""

__version__ = "0.1.0"
