"""Facts of the R37 recipe card shared by the cockpit and the simulated cluster (sim imports only this).

The card's facts and where each is used: docs/recipe.md.
"""

from __future__ import annotations

CONTAINER_NAME = "ds41_r37"
API_PORT = 8000
COORD_PORT = 29543
SERVED_MODEL = "deepseek-v4.1-flash"

STANDARD_REPO = "deepseek-ai/DeepSeek-V4.1-Flash"
DEALIGNAI_REPO = "dealignai/DeepSeek-V4.1-Flash-UNCENSORED-FP8"
CHECKPOINT_REPOS = (STANDARD_REPO, DEALIGNAI_REPO)
CHECKPOINT_SHARDS = 48
ENGRAM_SHARDS = (47, 48)
ENGRAM_COVERAGE_FILE = "r37-row-coverage.json"
CHECKPOINT_INDEX = "model.safetensors.index.json"

RECIPE_REPO = "0xTank/DeepSeek-V4.1-Flash-FP8-R37-4x-GB10"
RECIPE_INCLUDE = ("README.md", "launch/*", "tools/*", "bench/*")
RUNTIME_ARCHIVE = "runtime/ds41-r37-runtime.tar"
IMAGE_TAG = "local/ds41-r37-spark:runtime"
IMAGE_ID = "sha256:638d63b0f4bb9741c4afd4936e184659053e8a5ec466d6e7a8994ae0094e58fa"
ARCHIVE_SHA256 = "984e4e5ea68c3bac50c8fa2144dddc353b755d869ac734007b5614bfe87316d1"
ARCHIVE_SIZE = 40_716_629_504

# Serving settings the card says to retain.
MAXLEN = 600_000
SEQS = 8
GMU = 0.81
SPEC_K = 3

# Budgets from the card, bytes.
GB = 1_000_000_000
GIB = 1 << 30
CHECKPOINT_BUDGET = 510 * GB
ENGRAM_BUDGET = 48 * GB
RUNTIME_BUDGET = 85 * GB
MIN_MEM_AVAILABLE = 100 * GIB
MEM_STOP_FLOOR = 5 * GIB

# Label the cockpit puts on containers it starts, so `stop` never touches anything else.
LAUNCH_LABEL = "r37-cockpit.launched"

# Engine behaviour the card reports.
SINGLE_STREAM_TOKS = 50.50
AGGREGATE_8_TOKS = 229.28

# How often a streamed answer is read (and redrawn) once its first token is in: wakeups cost the client
# more than the bytes they bring (see cockpit/api/rawstream.py). `[ui] stream_frame_ms` overrides it.
STREAM_FRAME_MS = 300

# The query the cockpit's own looks at the engine (`/health`, `/v1/models`, `/metrics` through the tunnel)
# carry, so the engine's access log tells them from an operator's requests (the Logs pane hides them).
PROBE_PARAM, PROBE_VALUE = "r37-cockpit", "probe"
PROBE_QUERY = f"{PROBE_PARAM}={PROBE_VALUE}"
