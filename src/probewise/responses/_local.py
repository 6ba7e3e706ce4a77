"""Generation with a local transformers model: :class:`TransformersGenerator`.

Beside :mod:`probewise.responses.generators` (the OpenAI-compatible server generator and
the protocols), which names it too, where callers import it. It imports torch only when
it generates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

from probewise._extras import Extra, requires
from probewise._validation import int_at_least
from probewise.responses._stopping import DecidedRows, criteria_list
from probewise.responses.decide import StopSpec, StopWhenDecided, per_prompt
from probewise.responses.outcome import FinishReason
from probewise.responses.sealed import Completion, Sealed

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["TransformersGenerator"]


class _Generates(Protocol):
    def generate(self, **kwargs: object) -> object: ...


class TransformersGenerator:
    """Greedy (by default) batched generation with a local transformers model.

    Decodes only the new tokens; a completion that reached ``max_new_tokens``
    without an end-of-sequence token is :attr:`FinishReason.LENGTH`. Prompts go
    through the tokenizer's chat template as one user turn when ``chat_template``
    and the tokenizer has one. A batch that fails (out of memory, say) is retried
    prompt by prompt; a prompt that still fails is returned as its exception, which
    :func:`run_arm` counts as ``Error(GENERATION)``. Completions are returned
    :class:`Sealed`, and are never logged. With ``stop`` (see :meth:`generate_batch`)
    each row ends once its outcome is decided (asked every four new tokens): the
    completion is cut there and marked :attr:`FinishReason.DECIDED`, and the batch
    ends when every row has. Each completion counts its new tokens (``tokens``).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 128,
        batch_size: int = 8,
        chat_template: bool = True,
        do_sample: bool = False,
    ) -> None:
        int_at_least("max_new_tokens", max_new_tokens, 1)
        int_at_least("batch_size", batch_size, 1)
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self._batch_size = batch_size
        self.chat_template = chat_template
        self.do_sample = do_sample

    @property
    def batch_size(self) -> int:
        """Prompts per ``generate`` call."""
        return self._batch_size

    def __repr__(self) -> str:
        return (
            f"TransformersGenerator(model={type(self.model).__name__}, "
            f"max_new_tokens={self.max_new_tokens}, batch_size={self._batch_size})"
        )

    def run_identity(self) -> dict[str, str | int | float | bool | None]:
        """What a checkpoint binds a run to: the model's class and name or path, and
        the generation settings (not the batch size, which a resume may change)."""
        config = getattr(self.model, "config", None)
        name = getattr(config, "_name_or_path", None)
        return {
            "generator": "TransformersGenerator",
            "model": type(self.model).__name__,
            "name_or_path": name if isinstance(name, str) else None,
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.do_sample,
            "chat_template": self.chat_template,
        }

    def __call__(self, prompt: str) -> Completion:
        result = self.generate_batch([prompt])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _texts(self, prompts: Sequence[str]) -> list[str]:
        template = getattr(self.tokenizer, "chat_template", None)
        if not (self.chat_template and template):
            return list(prompts)
        texts: list[str] = []
        for prompt in prompts:
            rendered = self.tokenizer.apply_chat_template(  # pyright: ignore[reportUnknownMemberType]
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            texts.append(str(rendered))
        return texts

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(v for v in cast("Sequence[object]", value) if isinstance(v, int))
        return ids

    @property
    def can_stop_when_decided(self) -> bool:
        """True: :meth:`generate_batch` can end each row once its outcome is decided."""
        return True

    def _run(
        self, prompts: Sequence[str], stops: Sequence[StopWhenDecided | None]
    ) -> list[Completion]:
        with requires(Extra.TORCH, "TransformersGenerator"):
            import torch

        tokenizer = self.tokenizer
        tokenizer.padding_side = "left"  # decoder-only: new tokens start at one column
        pad_id = tokenizer.pad_token_id
        eos = self._eos_ids()
        if pad_id is None:
            pad_id = min(eos) if eos else 0
            tokenizer.pad_token_id = pad_id
        device = next(self.model.parameters()).device
        encoded = tokenizer(self._texts(prompts), return_tensors="pt", padding=True)
        input_ids = cast("torch.Tensor", encoded["input_ids"]).to(device)
        attention_mask = cast("torch.Tensor", encoded["attention_mask"]).to(device)
        extra: dict[str, object] = {}
        rows_decided: dict[int, int] = {}
        if any(stop is not None for stop in stops):
            criterion = DecidedRows(
                stops,
                start=input_ids.shape[1],
                eos=eos,
                decode=lambda ids: str(tokenizer.decode(ids, skip_special_tokens=True)),  # pyright: ignore[reportUnknownMemberType]
            )
            extra["stopping_criteria"] = criteria_list(criterion)
            rows_decided = criterion.decided
        with torch.no_grad():
            output = cast(
                "torch.Tensor",
                cast("_Generates", self.model).generate(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=self.do_sample,
                    pad_token_id=pad_id,
                    **extra,
                ),
            )
        new_tokens = cast("list[list[int]]", output[:, input_ids.shape[1] :].tolist())  # pyright: ignore[reportUnknownMemberType]
        completions: list[Completion] = []
        for index, row in enumerate(new_tokens):
            cut = next((i for i, token in enumerate(row) if token in eos), None)
            finish = FinishReason.LENGTH if cut is None else FinishReason.STOP
            kept = row if cut is None else row[:cut]
            made = len(row) if cut is None else cut + 1
            if index in rows_decided:
                made = rows_decided[index]
                kept, finish = row[:made], FinishReason.DECIDED
            text: object = tokenizer.decode(kept, skip_special_tokens=True)  # pyright: ignore[reportUnknownMemberType]
            completions.append(Completion(Sealed(str(text)), finish, tokens=made))
        return completions

    def generate_batch(
        self, prompts: Sequence[str], *, stop: StopSpec = None
    ) -> Sequence[Completion | BaseException]:
        """One completion (or exception) per prompt; a failed batch is retried one by one.
        ``stop``: end each row once decided (one for every prompt, or one per prompt)."""
        stops = per_prompt(stop, len(prompts))
        try:
            return self._run(prompts, stops)
        except Exception:
            if len(prompts) == 1:
                raise
        results: list[Completion | BaseException] = []
        for prompt, one in zip(prompts, stops, strict=True):
            try:
                results.extend(self._run([prompt], [one]))
            except Exception as error:
                results.append(error)
        return results
