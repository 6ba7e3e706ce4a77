"""Check predict_backend against torch's own SDPA backend choice on a CUDA GPU.

Usage (on a CUDA machine)::

    python benchmarks/sdpa_agreement.py [--out sdpa-agreement.json] [--quick]
        [--dtypes fp16,bf16,fp32] [--head-dims 64,128,256,512] [--show 20]

For a grid of calls (dtypes; head dims; no mask, a boolean or an additive
``(batch, 1, q, kv)`` mask, or a 3-D additive one; ``is_causal``; equal heads, GQA
and multi-query heads with ``enable_gqa`` on and off; dropout 0 / 0.1 / 0.125;
``q_len == kv_len``, ``q_len < kv_len`` and decode ``q_len == 1``; forward and
``requires_grad``) it builds real CUDA tensors and asks torch:

- per backend, ``torch.backends.cuda.can_use_flash_attention`` /
  ``can_use_efficient_attention`` / ``can_use_cudnn_attention`` on
  ``torch.backends.cuda.SDPAParams(q, k, v, attn_mask, dropout, is_causal, enable_gqa)``;
- overall, ``torch._fused_sdp_choice`` (the dispatcher's own answer, no kernel run),
  and the priority order it settles on (``torch._C._get_sdp_priority_order``);

and compares each with :func:`probewise.throughput.attention.sdpa.predict_backend`, for the
device's capability and an ``SdpaEnvironment`` read from the running torch (cuDNN and
CUDA versions, ``TORCH_CUDNN_SDPA_DEPRIORITIZED``). It prints an agreement table and
writes a JSON summary to ``--out``. Exit status: 0 all agree, 1 any disagreement,
2 no CUDA device (nothing checked).

Run it in a fresh process: torch fixes the priority order on the first dispatch, and
nothing here changes the ``enable_*_sdp`` flags, which must be at their defaults.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, assert_never

from probewise.throughput.attention.sdpa import (
    AttentionDtype,
    MaskKind,
    SdpaBackend,
    SdpaCall,
    SdpaEnvironment,
    predict_backend,
)

if TYPE_CHECKING:
    import torch

MASKS = ("none", "bool", "additive", "additive3d")
HEADS = (  # (query_heads, kv_heads, enable_gqa)
    (8, 8, False),
    (8, 8, True),
    (8, 2, True),
    (8, 1, True),
    (8, 1, False),
)
LENGTHS = ((256, 256), (64, 256), (1, 256))  # (q_len, kv_len)
BATCH = 2


class Case(NamedTuple):
    dtype: str
    head_dim: int
    mask: str
    is_causal: bool
    query_heads: int
    kv_heads: int
    enable_gqa: bool
    dropout: float
    query_length: int
    kv_length: int
    requires_grad: bool

    def call(self) -> SdpaCall:
        kind, shape = mask_layout(self)
        return SdpaCall(
            batch=BATCH,
            query_heads=self.query_heads,
            kv_heads=self.kv_heads,
            query_length=self.query_length,
            kv_length=self.kv_length,
            head_dim=self.head_dim,
            value_head_dim=self.head_dim,
            dtype=self.dtype,
            mask=kind,
            mask_shape=shape,
            is_causal=self.is_causal,
            dropout=self.dropout,
            enable_gqa=self.enable_gqa,
            requires_grad=self.requires_grad,
        )


def mask_layout(case: Case) -> tuple[MaskKind, tuple[int, ...] | None]:
    q, kv = case.query_length, case.kv_length
    match case.mask:
        case "none":
            return MaskKind.NONE, None
        case "bool":
            return MaskKind.BOOLEAN, (BATCH, 1, q, kv)
        case "additive":
            return MaskKind.ADDITIVE, (BATCH, 1, q, kv)
        case "additive3d":
            return MaskKind.ADDITIVE, (case.query_heads, q, kv)
        case other:
            raise ValueError(f"unknown mask {other!r}")


def grid(dtypes: list[str], head_dims: list[int], quick: bool) -> list[Case]:
    dropouts = (0.0, 0.1) if quick else (0.0, 0.1, 0.125)
    masks = MASKS[:3] if quick else MASKS
    cases = [
        Case(dtype, head_dim, mask, causal, hq, hkv, gqa, dropout, q, kv, grad)
        for dtype, head_dim, mask, causal, (hq, hkv, gqa), dropout, (q, kv), grad in (
            itertools.product(
                dtypes, head_dims, masks, (False, True), HEADS, dropouts, LENGTHS, (False, True)
            )
        )
    ]
    return cases


def torch_dtype(name: str) -> torch.dtype:
    import torch

    match AttentionDtype.parse(name):
        case AttentionDtype.FLOAT16:
            return torch.float16
        case AttentionDtype.BFLOAT16:
            return torch.bfloat16
        case AttentionDtype.FLOAT32:
            return torch.float32
        case AttentionDtype.FLOAT64:
            return torch.float64
        case _ as unreachable:
            assert_never(unreachable)


def environment_of_running_torch(frontend_d256: bool) -> SdpaEnvironment:
    import torch

    cuda = torch.version.cuda or "0.0"
    major, minor = (int(part) for part in cuda.split(".")[:2])
    deprioritized = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "").lower() in (
        "1",
        "true",
        "on",
        "yes",
    )
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return SdpaEnvironment(
        cudnn_version=cudnn,
        cuda_version=(major, minor),
        cudnn_frontend_supports_d256=frontend_d256,
        cudnn_deprioritized=deprioritized,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="sdpa-agreement.json", help="JSON summary path")
    parser.add_argument("--dtypes", default="fp16,bf16,fp32")
    parser.add_argument("--head-dims", default="64,128,256,512")
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--show", type=int, default=20, help="disagreements to print")
    parser.add_argument(
        "--no-frontend-d256",
        action="store_true",
        help="the build's cuDNN frontend is older than 1.24 (no d=256 cuDNN SDPA)",
    )
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend

    if not torch.cuda.is_available():
        print("sdpa_agreement: no CUDA device available; nothing checked.", file=sys.stderr)
        return 2

    started = time.perf_counter()
    device = torch.device("cuda")
    capability = torch.cuda.get_device_capability(device)
    environment = environment_of_running_torch(not args.no_frontend_d256)
    cases = grid(args.dtypes.split(","), [int(d) for d in args.head_dims.split(",")], args.quick)
    to_ours = {
        SDPBackend.FLASH_ATTENTION.value: SdpaBackend.FLASH,
        SDPBackend.EFFICIENT_ATTENTION.value: SdpaBackend.EFFICIENT,
        SDPBackend.CUDNN_ATTENTION.value: SdpaBackend.CUDNN,
        SDPBackend.MATH.value: SdpaBackend.MATH,
    }
    can_use = {
        SdpaBackend.FLASH: torch.backends.cuda.can_use_flash_attention,
        SdpaBackend.EFFICIENT: torch.backends.cuda.can_use_efficient_attention,
        SdpaBackend.CUDNN: torch.backends.cuda.can_use_cudnn_attention,
    }
    tally: dict[str, Counter[str]] = {
        name: Counter() for name in ["overall", *(b.value for b in SdpaBackend)]
    }
    chosen_counts: Counter[str] = Counter()
    disagreements: list[dict[str, object]] = []
    actual_order: list[str] = []
    predicted_order: list[str] = []

    for index, case in enumerate(cases):
        prediction = predict_backend(case.call(), capability=capability, environment=environment)
        dtype = torch_dtype(case.dtype)
        grad = case.requires_grad
        q = torch.randn(
            BATCH, case.query_heads, case.query_length, case.head_dim, device=device, dtype=dtype
        ).requires_grad_(grad)
        k = torch.randn(
            BATCH, case.kv_heads, case.kv_length, case.head_dim, device=device, dtype=dtype
        ).requires_grad_(grad)
        v = torch.randn_like(k).requires_grad_(grad)
        _, shape = mask_layout(case)
        mask: torch.Tensor | None = None
        if shape is not None:
            mask = (
                torch.ones(shape, device=device, dtype=torch.bool)
                if case.mask == "bool"
                else torch.zeros(shape, device=device, dtype=dtype)
            )
        choice = torch._fused_sdp_choice(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=case.dropout,
            is_causal=case.is_causal,
            enable_gqa=case.enable_gqa,
        )
        if index == 0:
            # Read after the first dispatch, which is when torch settles the order.
            actual_order = [
                to_ours[value].value
                for value in torch._C._get_sdp_priority_order()
                if value in to_ours
            ]
            predicted_order = [ruling.backend.value for ruling in prediction.rulings]
        actual = to_ours.get(choice)
        chosen_counts[actual.value if actual else str(choice)] += 1
        params = torch.backends.cuda.SDPAParams(
            q, k, v, mask, case.dropout, case.is_causal, case.enable_gqa
        )
        wrong: dict[str, object] = {}
        for backend, check in can_use.items():
            torch_says = bool(check(params, debug=False))
            ours = prediction.ruling(backend).usable
            tally[backend.value]["agree" if ours == torch_says else "disagree"] += 1
            if ours != torch_says:
                wrong[backend.value] = {
                    "torch_usable": torch_says,
                    "predicted_usable": ours,
                    "predicted_reasons": list(prediction.ruling(backend).reasons),
                }
        tally[SdpaBackend.MATH.value]["agree"] += 1
        overall_ok = actual is prediction.backend
        tally["overall"]["agree" if overall_ok else "disagree"] += 1
        if wrong or not overall_ok:
            disagreements.append(
                {
                    "case": case._asdict(),
                    "torch_choice": actual.value if actual else choice,
                    "predicted": prediction.backend.value,
                    "backends": wrong,
                }
            )
        del q, k, v, mask, params

    order_ok = actual_order == predicted_order
    seconds = time.perf_counter() - started
    print(
        f"torch {torch.__version__} ({torch.version.git_version[:12]}), CUDA {torch.version.cuda}, "
        f"cuDNN {environment.cudnn_version}, {torch.cuda.get_device_name(device)} "
        f"sm{capability[0]}{capability[1]}; {len(cases)} cases in {seconds:.1f} s"
    )
    print(f"priority order: torch {actual_order}, predicted {predicted_order}")
    print(f"{'check':<10} {'agree':>7} {'disagree':>9}")
    for name, counts in tally.items():
        print(f"{name:<10} {counts['agree']:>7} {counts['disagree']:>9}")
    print(f"torch chose: {dict(chosen_counts)}")
    for item in disagreements[: args.show]:
        print(json.dumps(item))
    if len(disagreements) > args.show:
        print(f"... and {len(disagreements) - args.show} more (see {args.out})")

    summary = {
        "torch_version": torch.__version__,
        "torch_git_version": torch.version.git_version,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(device),
        "capability": list(capability),
        "environment": {
            "cudnn_version": environment.cudnn_version,
            "cuda_version": list(environment.cuda_version),
            "cudnn_frontend_supports_d256": environment.cudnn_frontend_supports_d256,
            "cudnn_deprioritized": environment.cudnn_deprioritized,
        },
        "rules_version": predict_backend(cases[0].call()).rules_version,
        "priority_order": {"torch": actual_order, "predicted": predicted_order, "agree": order_ok},
        "cases": len(cases),
        "seconds": round(seconds, 2),
        "tally": {name: dict(counts) for name, counts in tally.items()},
        "torch_chose": dict(chosen_counts),
        "disagreements": disagreements,
    }
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 1 if disagreements or not order_ok else 0


if __name__ == "__main__":
    sys.exit(main())
