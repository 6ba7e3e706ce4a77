"""The profile probe end to end on a real device: scaling, padding, CE time, kernels.

Usage (on a CUDA machine; ``--device cpu`` runs the same path on CPU, slowly, with
an empty kernel table)::

    python benchmarks/gpu_profile.py [--device cuda] [--lengths 1024,2048,4096,8192]
        [--batch 4] [--out DIR]

A small Llama built from a config (4 layers, hidden 512, 8 heads, vocabulary
32,000; bf16 on CUDA, fp32 on CPU; SDPA attention), its training step forward +
backward with the model's own causal-LM loss and an AdamW step:

1. ``measure_scaling`` at each length (warm-up 2, repeats 5): the three-term fit;
2. ``padding_penalty``: ``batch`` sequences of half the longest length padded to
   the longest (attention mask on the padding) against the same real tokens
   unpadded;
3. ``time_loss``: HF's ``ForCausalLMLoss`` on ``batch x longest x vocab`` logits;
4. ``capture_kernels`` around two steps at the longest length, its kernel total
   checked against the printed table's ``Self CUDA time total`` footer
   (``read_profiler_table``), and the kernel table read back from the saved trace.

Everything measured is printed and saved under ``--out`` (raw samples, the Chrome
trace, the printed table). Meant to finish in under 5 minutes on one GPU.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lengths", default="1024,2048,4096,8192")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--out", default="gpu-profile-evidence")
    parser.add_argument("--small", action="store_true", help="a tiny model (for a CPU smoke run)")
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.loss.loss_utils import ForCausalLMLoss

    from probewise import KernelTable
    from probewise.throughput import capture_kernels, measure_scaling, padding_penalty, time_loss
    from probewise.throughput.table_readings import read_profiler_table

    started = time.perf_counter()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    lengths = [int(x) for x in args.lengths.split(",")]
    out = Path(args.out)
    torch.manual_seed(0)
    size = (
        {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
        }
        if args.small
        else {
            "hidden_size": 512,
            "intermediate_size": 1376,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
        }
    )
    config = LlamaConfig(
        vocab_size=32000,
        num_key_value_heads=size["num_attention_heads"],
        max_position_embeddings=max(lengths),
        attn_implementation="sdpa",
        **size,
    )
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    print(
        f"device {device} ({torch.cuda.get_device_name() if cuda else 'cpu'}), torch {torch.__version__}, {dtype}"
    )

    def step_for(length: int, *, batch: int = args.batch, pad_to: int | None = None) -> object:
        width = pad_to or length
        ids = torch.randint(0, config.vocab_size, (batch, width), device=device)
        mask = torch.ones(batch, width, dtype=torch.long, device=device)
        labels = ids.clone()
        if pad_to is not None:
            mask[:, length:] = 0
            labels[:, length:] = -100

        def step() -> None:
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    scaling = measure_scaling(
        step_for, lengths, batch=args.batch, warmup=2, repeats=5, save_to=out / "scaling"
    )
    fit = scaling.fit
    print("\nscaling (median s per step):")
    for timing in scaling.timings:
        print(
            f"  {timing.label:>6}: {timing.median:.4f} (min {timing.min:.4f}, max {timing.max:.4f})"
        )
    shares = fit.shares(max(lengths), args.batch)
    print(
        f"  fit: quadratic {fit.quadratic:.4g} ± {fit.stderr.quadratic:.2g}, linear {fit.linear:.4g} "
        f"± {fit.stderr.linear:.2g}, fixed {fit.fixed:.4g} ± {fit.stderr.fixed:.2g}; dof {fit.dof}, "
        f"r² {fit.r_squared:.4f}, loo {fit.loo_max_error:.1%}, pinned {[t.value for t in fit.at_bound]}"
    )
    print(
        f"  shares at {max(lengths)}: quadratic {shares.quadratic:.1%}, linear {shares.linear:.1%}, "
        f"fixed {shares.fixed:.1%}"
    )

    longest = max(lengths)
    half = longest // 2
    penalty = padding_penalty(
        step_for(half, pad_to=longest),
        step_for(half),
        warmup=2,
        repeats=5,
        save_to=out / "padding",
    )
    print(
        f"\npadding penalty ({args.batch} x {half} real tokens padded to {longest}): "
        f"{penalty.ratio:.2f}x (range {penalty.ratio_low:.2f}..{penalty.ratio_high:.2f})"
    )

    vocab = config.vocab_size
    loss_timing = time_loss(
        lambda logits, labels: ForCausalLMLoss(logits, labels, vocab_size=vocab),
        vocab_size=vocab,
        tokens=longest,
        batch=args.batch,
        logits_dtype="bf16" if cuda else "fp32",
        device=args.device,
        warmup=2,
        repeats=5,
        save_to=out / "loss",
    )
    print(f"\nCE forward + backward ({loss_timing.label}): {loss_timing.median:.4f} s median")

    capture = capture_kernels(step_for(longest), steps=2, warmup=1, save_to=out / "kernels")
    table = capture.kernels
    print(
        f"\nkernels over 2 steps at {longest}: kernel {table.kernel_us / 1e3:.3f} ms, memcpy "
        f"{table.memcpy_us / 1e3:.3f} ms, memset {table.memset_us / 1e3:.3f} ms; naive sum "
        f"{(table.naive_device_us or 0.0) / 1e3:.3f} ms"
    )
    for row in table.top(8):
        print(
            f"  {row.device_us / 1e3:10.3f} ms  {row.calls or 0:>6}  {row.kind.value:<13} {row.name[:70]}"
        )
    reading = read_profiler_table((out / "kernels" / "key_averages.txt").read_text())
    footer = reading.footer_self_device_us
    ok = True
    if cuda:
        if footer is None:
            print("  !! the printed table has no Self CUDA time total footer")
            ok = False
        else:
            # The printed table holds only row_limit rows; its footer covers them all.
            gap = footer - table.device_us
            print(
                f"  footer Self CUDA total {footer / 1e3:.3f} ms; kernel + memcpy + memset "
                f"{table.device_us / 1e3:.3f} ms; gap {gap:.1f} us (tolerance {reading.tolerance_us:.1f})"
            )
            ok = math.isclose(
                footer, table.device_us, rel_tol=1e-3, abs_tol=reading.tolerance_us + 1.0
            )
    again = KernelTable.from_chrome_trace(out / "kernels" / "trace.json")
    same = math.isclose(again.kernel_us, table.kernel_us, rel_tol=1e-6, abs_tol=0.01)
    print(
        f"  trace read back: kernel {again.kernel_us / 1e3:.3f} ms ({'matches' if same else 'DIFFERS'})"
    )
    ok = ok and same
    print(
        f"\nevidence in {out}/; {time.perf_counter() - started:.0f} s in all; {'OK' if ok else 'CHECK FAILED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
