"""Where blocks_v1's model lives: the file shipped in the package, and the variable that names another.
Apart from the model code (numpy, LightGBM), so the command line can name them in its help."""

from __future__ import annotations

from pathlib import Path

MODEL_DIR = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL = MODEL_DIR / "blocks_v1.json.gz"
MODEL_ENV = "HOSTCRAWL_BLOCKS_MODEL"  # a `hostcrawl clean train` model to use instead of the packaged one
