"""Stop when decided: tokens and time per prompt with and without stopping (issue 33).

Usage::

    python benchmarks/decide_early.py [--data DIR] [--n N] [--rate TOKENS_PER_S]
        [--concurrency C] [--tiny-prompts N] [--json]

Two parts, side by side in one run:

1. A local streaming server (its own process, on 127.0.0.1) answers each prompt with a
   real reply from the development sets (``xstest-dev``, ``rbr-gold``,
   ``gptfuzz-train`` in ``DIR``; ``N`` replies drawn with a fixed seed, the prompt is
   the reply's id), as server-sent events of one token each at ``rate`` tokens a
   second. A token here is a word with the whitespace before it (the replies'
   tokenizers are not at hand). A reply longer than ``max_tokens`` is cut there and
   ends with ``length``, as a server would. ``OpenAICompatibleGenerator(stream=True)``
   runs every prompt through :func:`probewise.run_arm` with ``stop_when_decided`` on
   and off, at ``max_tokens`` 256, 512 and 1,024: tokens generated per prompt, wall
   time per prompt, and whether every prompt's outcome is the same both ways (bucket
   and rule; the decided and truncated marks aside).
2. A tiny randomly initialised Llama (built from a config, CPU) through
   :class:`probewise.TransformersGenerator` (8 prompts, one batch, greedy): the same
   figures for the mechanics, the best of ``--rounds`` runs each.

Completion text is never printed: counts and times only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pathlib
import random
import re
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

import attrs

from probewise import ArmTally, OpenAICompatibleGenerator, Outcome, Rubric, run_paired
from probewise.responses.outcome import Error

SETS = ("xstest-dev", "rbr-gold", "gptfuzz-train")
LIMITS = (256, 512, 1024)
_TOKEN = re.compile(r"\s*\S+|\s+$")


def _replies(data: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in SETS:
        for line in (pathlib.Path(data) / f"{name}.jsonl").read_text("utf-8").splitlines():
            row = json.loads(line)
            out[row["id"]] = row["completion"]
    return out


def _serve(port: int, data: str, ids: list[str], rate: float) -> None:
    """The streaming server (run in its own process)."""
    replies = _replies(data)
    texts = {i: replies[i] for i in ids}
    del replies
    pause = 1.0 / rate

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            limit = int(body["max_tokens"])
            tokens = _TOKEN.findall(texts[body["messages"][-1]["content"]])
            finish = "length" if len(tokens) > limit else "stop"
            tokens = tokens[:limit]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for token in tokens:
                    time.sleep(pause)
                    event = {"choices": [{"delta": {"content": token}, "finish_reason": None}]}
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                done = {"choices": [{"delta": {}, "finish_reason": finish}]}
                self.wfile.write(b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n")
            except OSError:
                pass  # the client closed the stream: decided

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256

    Server(("127.0.0.1", port), Handler).serve_forever()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _plain(outcome: Outcome) -> Outcome:
    """The outcome without the decided and truncated marks (what must not change)."""
    if isinstance(outcome, Error):
        return outcome
    return attrs.evolve(outcome, decided=False, truncated=False)


def _tally(tally: ArmTally) -> dict[str, int]:
    return {k: v for k, v in tally.to_dict().items() if k not in ("tokens", "counted")}


def _server_part(args: argparse.Namespace) -> dict[str, object]:
    ids = sorted(_replies(args.data))
    random.Random(args.seed).shuffle(ids)
    ids = ids[: args.n]
    port = _free_port()
    server = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(port, args.data, ids, args.rate), daemon=True
    )
    server.start()
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        prompts = {i: i for i in ids}
        warm = OpenAICompatibleGenerator(f"http://127.0.0.1:{port}/v1", "replay", max_tokens=8)
        warm.generate_batch(ids[:4])  # (imports, the TLS context, the server's threads)
        out: dict[str, object] = {"prompts": len(ids), "rate_tokens_per_s": args.rate}
        for limit in LIMITS:
            generator = OpenAICompatibleGenerator(
                f"http://127.0.0.1:{port}/v1",
                "replay",
                max_tokens=limit,
                stream=True,
                concurrency=args.concurrency,
                timeout=600.0,
                retries=0,
            )
            row: dict[str, object] = {}
            outcomes: dict[bool, dict[str, Outcome]] = {}
            for stop in (False, True):
                start = time.perf_counter()
                result = run_paired(
                    prompts, generator, _Null(), stop_when_decided=stop, progress=False
                )
                seconds = time.perf_counter() - start
                tally = result.tally_a
                outcomes[stop] = {cast("str", p.prompt_id): p.a for p in result.pairs}
                row["stop" if stop else "whole"] = {
                    "tokens_per_prompt": round(tally.tokens_per_prompt, 1),
                    "seconds_per_prompt": round(seconds / len(ids), 4),
                    "wall_seconds": round(seconds, 2),
                    "tally": _tally(tally),
                }
            changed = sum(_plain(outcomes[True][i]) != _plain(outcomes[False][i]) for i in ids)
            whole = cast("dict[str, float]", row["whole"])
            stopped = cast("dict[str, float]", row["stop"])
            row["outcomes_changed"] = changed
            row["token_factor"] = round(
                whole["tokens_per_prompt"] / stopped["tokens_per_prompt"], 2
            )
            row["time_factor"] = round(whole["wall_seconds"] / stopped["wall_seconds"], 2)
            out[f"max_tokens={limit}"] = row
        return out
    finally:
        server.terminate()
        server.join()


class _Null:
    """Arm B of the paired run: answers nothing at once (only arm A is measured)."""

    batch_size = 1024

    def generate_batch(self, prompts: list[str]) -> list[str]:
        return ["" for _ in prompts]


def _tiny_part(args: argparse.Namespace) -> dict[str, object]:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from probewise.responses import TransformersGenerator, run_arm

    words = ["[EOS]", "[PAD]", *(f"w{i}" for i in range(254))]
    core = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[PAD]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="[EOS]", pad_token="[PAD]")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=0,
        pad_token_id=1,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    prompts = {
        i: f"w{i % 200} w{(7 * i) % 200} w{(13 * i) % 200}" for i in range(args.tiny_prompts)
    }
    out: dict[str, object] = {"prompts": len(prompts), "torch_threads": torch.get_num_threads()}
    rubric = Rubric.default()
    for limit in LIMITS:
        generator = TransformersGenerator(model, tokenizer, max_new_tokens=limit, batch_size=8)
        row: dict[str, object] = {}
        for stop in (False, True):
            times: list[float] = []
            for _ in range(args.rounds):  # the best of a few: the CPU may be shared
                start = time.perf_counter()
                tally = run_arm(prompts, generator, rubric, stop_when_decided=stop, progress=False)
                times.append(time.perf_counter() - start)
            seconds = min(times)
            row["stop" if stop else "whole"] = {
                "tokens_per_prompt": round(tally.tokens_per_prompt, 1),
                "seconds_per_prompt": round(seconds / len(prompts), 4),
                "tally": _tally(tally),
            }
        out[f"max_new_tokens={limit}"] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", default="../shared/data/responses")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tiny-prompts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="tiny model: best of R runs")
    parser.add_argument("--skip-tiny", action="store_true")
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {}
    if not args.skip_server:
        report["server"] = _server_part(args)
    if not args.skip_tiny:
        report["tiny_model"] = _tiny_part(args)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
