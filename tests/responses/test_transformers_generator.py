"""TransformersGenerator: real generate() on a tiny model and a tokenizer built here."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from probewise import Completion, FinishReason, classify
from probewise.responses.arms import run_arm, run_paired
from probewise.responses.generators import BatchGenerate, TransformersGenerator
from probewise.responses.sealed import Sealed

WORDS = ["[EOS]", "[PAD]", "here", "is", "the", "answer", "i", "cannot", "help", "with", "that"]


def make_tokenizer(first: str) -> PreTrainedTokenizerFast:
    # Token id 0 is what a zeroed lm_head always picks (every logit 0, argmax 0).
    words = [first, *[w for w in WORDS if w != first]]
    vocab = {w: i for i, w in enumerate(words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[PAD]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="[EOS]", pad_token="[PAD]")


def tiny_config(**extra: object) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        **extra,
    )


def make_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = tiny_config(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model.eval()


def test_length_limit_is_length_and_only_new_tokens_are_decoded() -> None:
    tokenizer = make_tokenizer("answer")  # greedy picks "answer" forever: no EOS
    generator = TransformersGenerator(
        make_model(tokenizer), tokenizer, max_new_tokens=3, batch_size=2
    )
    assert isinstance(generator, BatchGenerate)
    results = generator.generate_batch(["here is", "i cannot help with that"])
    assert len(results) == 2
    for result in results:
        assert isinstance(result, Completion)
        assert result.finish_reason is FinishReason.LENGTH
        assert isinstance(result.text, Sealed)
    outcome = classify(results[1])
    assert outcome.truncated  # type: ignore[union-attr]


def test_immediate_eos_is_an_empty_stop() -> None:
    tokenizer = make_tokenizer("[EOS]")  # greedy picks EOS first
    generator = TransformersGenerator(
        make_model(tokenizer), tokenizer, max_new_tokens=4, batch_size=4
    )
    tally = run_arm({"a": "here is", "b": "the answer", "c": "i cannot"}, generator, progress=False)
    assert tally.empty == 3
    assert tally.truncated == 0


def test_a_failed_batch_is_retried_prompt_by_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = make_tokenizer("answer")
    model = make_model(tokenizer)
    generator = TransformersGenerator(model, tokenizer, max_new_tokens=2, batch_size=3)
    real = model.generate
    sizes: list[int] = []

    def flaky(**kwargs: object) -> object:
        ids = kwargs["input_ids"]
        assert isinstance(ids, torch.Tensor)
        sizes.append(int(ids.shape[0]))
        if ids.shape[0] > 1:
            raise torch.OutOfMemoryError("simulated out of memory")
        if sizes.count(1) == 2:
            raise RuntimeError("this prompt fails alone too")
        return real(**kwargs)  # type: ignore[operator]

    monkeypatch.setattr(model, "generate", flaky)
    tally = run_arm({"a": "here", "b": "is", "c": "the"}, generator, progress=False)
    assert sizes == [3, 1, 1, 1]
    assert tally.error == 1
    assert tally.n == 3


def test_the_generator_is_callable_one_prompt_at_a_time() -> None:
    tokenizer = make_tokenizer("answer")
    generator = TransformersGenerator(make_model(tokenizer), tokenizer, max_new_tokens=2)
    completion = generator("here is")
    assert completion.finish_reason is FinishReason.LENGTH
    assert "answer" not in repr(generator)
    result = run_paired({"p": "here"}, generator, generator, progress=False)
    assert result.tally_a == result.tally_b


@pytest.mark.parametrize("kwargs", [{"max_new_tokens": 0}, {"batch_size": 0}])
def test_bad_arguments(kwargs: dict[str, int]) -> None:
    from probewise.errors import InvalidInputError

    tokenizer = make_tokenizer("answer")
    with pytest.raises(InvalidInputError):
        TransformersGenerator(make_model(tokenizer), tokenizer, **kwargs)


@pytest.mark.parametrize("kwargs", [{"max_new_tokens": "8"}, {"batch_size": 2.0}])
def test_a_wrong_typed_count_is_an_argument_type_error(kwargs: dict[str, object]) -> None:
    # Before, "8" < 1 escaped as the bare TypeError of the comparison.
    from probewise.errors import ArgumentTypeValueError

    tokenizer = make_tokenizer("answer")
    with pytest.raises(ArgumentTypeValueError, match=r"must be an int >= 1, got (str|float)$"):
        TransformersGenerator(make_model(tokenizer), tokenizer, **kwargs)  # type: ignore[arg-type]


def test_transformers_judge_maps_the_models_labels() -> None:
    from transformers import LlamaForSequenceClassification

    from probewise.responses.judge import JudgeVerdict, TransformersJudge, judge_completion

    tokenizer = make_tokenizer("answer")
    config = tiny_config(
        pad_token_id=tokenizer.pad_token_id,
        num_labels=2,
        id2label={0: "REFUSAL", 1: "OK"},
        label2id={"REFUSAL": 0, "OK": 1},
    )
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():
        model.score.weight.zero_()  # every logit 0: argmax is label 0
    judge = TransformersJudge(
        model, tokenizer, label_map={"REFUSAL": JudgeVerdict.REFUSED, "OK": JudgeVerdict.COMPLIED}
    )
    assert judge_completion(Completion("i cannot help with that"), judge) is JudgeVerdict.REFUSED
    partial = TransformersJudge(model, tokenizer, label_map={"OK": JudgeVerdict.COMPLIED})
    assert judge_completion(Completion("here is the answer"), partial) is None  # unmapped label
    assert "REFUSAL" in repr(judge)


def test_chat_template_wraps_each_prompt_as_one_user_turn() -> None:
    tokenizer = make_tokenizer("answer")
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }} {{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %} answer{% endif %}"
    )
    generator = TransformersGenerator(make_model(tokenizer), tokenizer, max_new_tokens=2)
    assert generator._texts(["is the"]) == ["user is the answer"]
    plain = TransformersGenerator(make_model(tokenizer), tokenizer, chat_template=False)
    assert plain._texts(["is the"]) == ["is the"]
    assert generator("is the").finish_reason is FinishReason.LENGTH


def test_rows_stop_once_decided() -> None:
    """Row 0 stops once its outcome is decided; row 1 (no stop) runs to the limit.
    The decided outcome is the whole reply's, marked decided and not truncated."""
    from probewise import Complied, Rubric
    from probewise.responses.decide import StopWhenDecided

    tokenizer = make_tokenizer("answer")  # "answer answer ...": no EOS
    generator = TransformersGenerator(
        make_model(tokenizer), tokenizer, max_new_tokens=40, batch_size=2
    )
    assert generator.can_stop_when_decided
    rubric = Rubric(opening_chars=20)
    stop = StopWhenDecided(rubric=rubric)
    decided, whole = generator.generate_batch(["here is", "here is"], stop=[stop, None])
    assert isinstance(decided, Completion)
    assert isinstance(whole, Completion)
    assert decided.finish_reason is FinishReason.DECIDED
    assert whole.finish_reason is FinishReason.LENGTH
    assert whole.tokens == 40
    assert decided.tokens is not None
    assert 0 < decided.tokens < 40
    assert decided.tokens % 4 == 0  # asked every four tokens
    assert classify(decided, rubric) == Complied(decided=True)
    assert classify(whole, rubric) == Complied(truncated=True)
    # run_arm stops by default and counts the tokens.
    tally = run_arm({1: "here is", 2: "here is"}, generator, rubric)
    assert tally.complied == 2
    assert tally.decided == 2
    assert tally.truncated == 0
    assert tally.counted == 2
    assert tally.tokens == 2 * decided.tokens
    off = run_arm({1: "here is"}, generator, rubric, stop_when_decided=False)
    assert (off.decided, off.truncated, off.tokens) == (0, 1, 40)
