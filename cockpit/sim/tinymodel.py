"""Build a tiny random-weight Llama that real vLLM can serve, entirely from local data (no hub).

Run with the vLLM environment's python (it has torch, transformers and tokenizers):
    python tinymodel.py OUT_DIR
Deterministic: a fixed seed, a fixed corpus, a byte-level BPE trained here; the caller caches OUT_DIR by the
hash of this file. 2 layers, hidden 256 (head size 64, which vLLM's CPU attention supports), ~2 M parameters.
The chat template is DeepSeek-style and reads `thinking` (chat_template_kwargs), as the reasoning parser
`deepseek_v3` expects: `<think>` opens the answer when thinking is on, `</think>` when it is off.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import sys
from pathlib import Path

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
SPECIAL = [BOS, EOS, USER, ASSISTANT, "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}{{ m['content'] }}"
    "{%- elif m['role'] == 'user' -%}" + USER + "{{ m['content'] }}"
    "{%- elif m['role'] == 'assistant' -%}" + ASSISTANT + "{{ m['content'] or '' }}" + EOS +
    "{%- elif m['role'] == 'tool' -%}" + USER + "tool result: {{ m['content'] }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}" + ASSISTANT +
    "{%- if thinking is defined and thinking -%}<think>{%- else -%}</think>{%- endif -%}"
    "{%- endif -%}"
)

CORPUS_EXTRA = """\
The cockpit launches four ranks, watches their logs, reads the engine's metrics and streams answers.
A container starts, loads its weights, sizes its KV cache, captures graphs and serves the API.
The operator presses a key; the shell line is quoted; the host answers over SSH.
Preflight checks clocks, memory, disks, the fabric and the GPU before any launch.
{"city": "Paris", "unit": "celsius"} {"name": "get_weather", "arguments": {"city": "Oslo"}}
0 1 2 3 4 5 6 7 8 9 10 42 100 1440 2048 65535
"""


def corpus() -> list[str]:
    with contextlib.redirect_stdout(io.StringIO()):   # the Zen of Python: a corpus every python ships
        import this
    zen = codecs.decode(this.s, "rot13")
    return [line for line in (zen + "\n" + CORPUS_EXTRA).splitlines() if line.strip()] * 4


def build(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS,
                                   model_max_length=2048)
    fast.chat_template = CHAT_TEMPLATE
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=fast.convert_tokens_to_ids(BOS), eos_token_id=fast.convert_tokens_to_ids(EOS),
        tie_word_embeddings=False, torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "r37-tiny-model.json").write_text(json.dumps({"vocab": len(fast), "layers": 2, "hidden": 256}))


if __name__ == "__main__":
    build(Path(sys.argv[1]))
