"""Time a tiny Llama's training step on CPU at several lengths, for ``probewise fit``.

Usage::

    python benchmarks/cpu_step_scaling.py --lengths 2048,4096,8192,16384 --repeats 3 \\
        --out steps.csv
    probewise fit steps.csv --plot fit.png

The model is built from a config (no weights are downloaded): 2 layers, hidden 256,
8 heads, SDPA attention, fp32, vocabulary 4,096. A step is forward + backward with
the model's own causal-LM loss, then ``optimizer.step()`` (AdamW) and
``zero_grad``. Each length gets one untimed warm-up step, then ``--repeats`` timed
ones (``time.perf_counter``; on CPU no synchronisation is needed). Until the timing
harness lands (``probewise.throughput.timing.harness``) this script is the stand-in.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="2048,4096,8192,16384")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--out", default="steps.csv")
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=32768,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rows: list[tuple[int, float, int]] = []
    for length in (int(x) for x in args.lengths.split(",")):
        ids = torch.randint(0, config.vocab_size, (args.batch, length))

        def step(ids: torch.Tensor = ids) -> None:
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        step()  # warm-up at this shape
        for _ in range(args.repeats):
            start = time.perf_counter()
            step()
            rows.append((length, time.perf_counter() - start, args.batch))
        print(
            f"{length}: " + ", ".join(f"{s:.3f}" for ln, s, _ in rows if ln == length), flush=True
        )
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write("length,seconds,batch\n")
        for length, seconds, batch in rows:
            handle.write(f"{length},{seconds:.6f},{batch}\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
