"""Write a tiny random-weight llama as GGUF that llama.cpp's llama-server loads and answers with.

Run with the python of scripts/llama.sh's venv (it has `gguf` and numpy):
    python tinygguf.py OUT.gguf
Deterministic (a fixed seed). 2 layers, hidden 64, 4 heads (2 KV heads), a sentencepiece-style vocab of
~400 tokens: the controls, the 256 byte-fallback tokens and a few words. The ChatML template is in the
file, its `<|im_start|>`/`<|im_end|>` are control tokens. The output rows of the end-of-generation tokens,
of the control bytes and of the bytes ≥ 0x80 are pushed far down (every hidden state has a large constant
first component, see below), so a sampled answer is printable ASCII and words and runs to max_tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD_KV, N_CTX_TRAIN = 64, 128, 2, 4, 2, 4096
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
WORDS = ["the", "sea", "sky", "cloud", "rank", "engine", "host", "answer", "token", "model", "cockpit",
         "metrics", "server", "bench", "quick", "light", "wind", "stone", "river", "city", "north", "south",
         "over", "under", "with", "from", "into", "and", "but", "not", "all", "one", "two", "three"]


def vocab() -> tuple[list[str], list[float], list[int], dict[str, int]]:
    """(tokens, scores, types, ids of the specials): sentencepiece ("llama") token types."""
    normal, unknown, control, byte = 1, 2, 3, 6
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [unknown, control, control, control, control]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [byte] * 256
    pieces = ["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["▁" + w for w in WORDS] + WORDS
    pieces += [".", ",", "!", "?", "\n"]
    seen = set(tokens)
    for p in pieces:
        if p not in seen:
            seen.add(p)
            tokens.append(p)
            types.append(normal)
    # sentencepiece merges by score: longer pieces first
    scores = [0.0 if t != normal else -1.0 / (1 + len(tok)) for tok, t in zip(tokens, types, strict=True)]
    ids = {name: tokens.index(name) for name in ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")}
    return tokens, scores, types, ids


def build(out: Path) -> None:
    import gguf
    import numpy as np

    rng = np.random.default_rng(0)
    tokens, scores, types, ids = vocab()
    n_vocab = len(tokens)

    def rand(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name("r37 tiny llama (random weights)")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(ids["<s>"])
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_unk_token_id(ids["<unk>"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    # every embedding's first component is 1 (the rest ~0.02): the residual stream, and so the normed
    # hidden state, keeps a large positive first component; an output row with -8 there is never sampled
    embd = rand(n_vocab, N_EMBD)
    embd[:, 0] = 1.0
    output = rand(n_vocab, N_EMBD, std=0.5)
    output[:, 0] = 0.0
    banned = [ids[n] for n in ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")]
    banned += [i for i, tok in enumerate(tokens)
               if tok.startswith("<0x") and not 0x20 <= int(tok[3:5], 16) < 0x7F]
    output[banned, 0] = -8.0
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", output)
    head_dim = N_EMBD // N_HEAD
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    build(Path(sys.argv[1]))
