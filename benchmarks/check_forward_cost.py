"""What check_forward costs before a real-sized run's first step.

A Llama 3 8B-shaped model (the bundled config, built on the meta device: no weights)
in training mode, and one row of 8,192 tokens packed from four documents by
transformers' DataCollatorWithFlattening. check_forward runs twice: with
``use_cache=False`` in the call (passes) and with the config's ``use_cache=True``
(CrossDocumentAttentionError). Prints the verdict and the wall time of each call.

Run: ``.venv/bin/python benchmarks/check_forward_cost.py``
"""

from __future__ import annotations

import importlib.resources
import json
import time

import torch
import transformers

from probewise.errors import CrossDocumentAttentionError
from probewise.integrations.torch import check_forward


def main() -> None:
    resource = importlib.resources.files("probewise.throughput.attention") / "configs"
    data = json.loads((resource / "llama3-8b.json").read_text(encoding="utf-8"))
    data = {k: v for k, v in data.items() if not k.startswith("_probewise")}
    config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            config, attn_implementation="sdpa", dtype=torch.bfloat16
        )
    model.train()
    documents = (2048, 3072, 1024, 2048)
    features = [{"input_ids": list(range(1, 1 + n))} for n in documents]
    batch = dict(transformers.DataCollatorWithFlattening()(features))
    for kwargs in ({"use_cache": False}, {}):
        start = time.perf_counter()
        try:
            check_forward(model, batch, **kwargs)
            verdict = "pass"
        except CrossDocumentAttentionError:
            verdict = "CrossDocumentAttentionError"
        print(f"{kwargs or 'config use_cache'}: {verdict} in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
