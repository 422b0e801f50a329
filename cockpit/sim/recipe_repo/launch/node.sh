#!/usr/bin/env bash
# Launch one rank of the R37 DeepSeek-V4.1-Flash TP4 deployment: bash launch/node.sh RANK cluster.env
# DRY_RUN=1 prints the docker command (one line) and exits. An existing container is never replaced.
set -euo pipefail

die() { echo "node.sh: $*" >&2; exit "${2:-1}"; }
[ $# -eq 2 ] || { echo "usage: bash launch/node.sh RANK cluster.env" >&2; exit 2; }
RANK=$1
ENV_FILE=$2
case $RANK in ''|*[!0-9]*) echo "node.sh: RANK must be a non-negative integer, got '$RANK'" >&2; exit 2;; esac
[ -r "$ENV_FILE" ] || { echo "node.sh: cannot read $ENV_FILE" >&2; exit 2; }
# shellcheck source=/dev/null
source "$ENV_FILE"

for var in FABRIC_IFACE IB_HCA IB_GID_INDEX MODEL_PATH ENGRAM_PATH CACHE_PATH IMAGE CONTAINER_NAME \
           API_PORT MASTER_PORT MAXLEN SEQS GMU SPEC_K MAX_BATCHED_TOKENS R37_USE_LOCAL_ENGRAM_EDGES; do
  [ -n "${!var:-}" ] || { echo "node.sh: $var is not set in $ENV_FILE" >&2; exit 2; }
done
[ "${#NODE_IPS[@]}" -gt 0 ] 2>/dev/null || { echo "node.sh: NODE_IPS is not set in $ENV_FILE" >&2; exit 2; }
NNODES=${#NODE_IPS[@]}
[ "$RANK" -lt "$NNODES" ] || { echo "node.sh: RANK $RANK is out of range for $NNODES nodes" >&2; exit 2; }
MASTER_ADDR=${NODE_IPS[0]}

cmd=(docker run -d --name "$CONTAINER_NAME"
  --network host --ipc host --gpus all --device /dev/infiniband
  --ulimit memlock=-1 --ulimit nofile=1048576:1048576 --shm-size 32g
  -e NCCL_IB_HCA="$IB_HCA" -e NCCL_IB_GID_INDEX="$IB_GID_INDEX"
  -e NCCL_SOCKET_IFNAME="$FABRIC_IFACE" -e GLOO_SOCKET_IFNAME="$FABRIC_IFACE"
  -e VLLM_HOST_IP="${NODE_IPS[$RANK]}" -e R37_USE_LOCAL_ENGRAM_EDGES="$R37_USE_LOCAL_ENGRAM_EDGES"
  -e R37_ENGRAM_PATH="$ENGRAM_PATH" -e HF_HUB_OFFLINE=1
  -v "$MODEL_PATH:$MODEL_PATH:ro" -v "$ENGRAM_PATH:$ENGRAM_PATH" -v "$CACHE_PATH:/root/.cache"
  "$IMAGE"
  vllm serve "$MODEL_PATH" --served-model-name deepseek-v4.1-flash --trust-remote-code
  --tensor-parallel-size "$NNODES" --distributed-executor-backend mp
  --nnodes "$NNODES" --node-rank "$RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT")
if [ "$RANK" -gt 0 ]; then
  cmd+=(--headless)
fi
cmd+=(--host 0.0.0.0 --port "$API_PORT"
  --max-model-len "$MAXLEN" --max-num-seqs "$SEQS" --gpu-memory-utilization "$GMU"
  --max-num-batched-tokens "$MAX_BATCHED_TOKENS" --kv-cache-dtype fp8 --block-size 256
  --speculative-config "{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":$SPEC_K}"
  --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE"}'
  --limit-mm-per-prompt '{"image":4}' --mm-processor-cache-gb 1)

quote() {  # POSIX-shell quoting, one word: plain words stay bare, others get single quotes
  local word=$1
  if [[ $word =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    printf '%s' "$word"
  else
    printf "'%s'" "${word//\'/\'\\\'\'}"
  fi
}

if [ "${DRY_RUN:-0}" = "1" ]; then
  line=""
  for word in "${cmd[@]}"; do line+="${line:+ }$(quote "$word")"; done
  printf '%s\n' "$line"
  exit 0
fi

existing=$(docker ps -a --filter "name=^/${CONTAINER_NAME}\$" --format '{{.ID}} {{.Status}}') \
  || die "cannot list containers (is docker running?)"
if [ -n "$existing" ]; then
  echo "node.sh: container $CONTAINER_NAME already exists ($existing); refusing to replace it." >&2
  echo "node.sh: inspect it with 'docker logs --tail 100 $CONTAINER_NAME' and remove it yourself if intended." >&2
  exit 1
fi
exec "${cmd[@]}"
