#!/usr/bin/env bash
# encoder_v2, decoder_v2 and rescraper_v1 on a lent GPU: pages/s and what each page became.
# Needs: pip install -e '.[gpu,vllm]', the models reachable (hub or $HOSTCRAWL_*_MODEL), ../shared/data/wcxb-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "no GPU here" >&2; exit 2; }
exec "${PYTHON:-.venv/bin/python}" benchmarks/gpu_check.py "$@"
