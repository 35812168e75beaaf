"""The simulated model: right answers to a few known prompts, plausible text otherwise.

Greedy decoding (temperature 0) is deterministic: the same prompt always gives the same text. Sampling
(temperature > 0) draws from its own seeded generator, so answers vary in wording but stay correct.
`garbage` answers are what a broken kernel produces: fluent-looking junk that never holds the right answer.
`drift` answers read well and are wrong: another number, another city, other plausible sentences; no
garbage token and no crash, so only a comparison with other launches (or a known answer) shows them.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

_PIECE = re.compile(r"\s*[\w']+|\s*[^\w\s]|\s+")
_ARITHMETIC = re.compile(r"(-?\d+)\s*([-+*x×])\s*(-?\d+)")
_FACTS = (
    (re.compile(r"capital (city )?of france", re.I), "Paris", "the capital of France", "Lyon"),
    (re.compile(r"capital (city )?of japan", re.I), "Tokyo", "the capital of Japan", "Osaka"),
    (re.compile(r"capital (city )?of germany", re.I), "Berlin", "the capital of Germany", "Munich"),
    (re.compile(r"capital (city )?of italy", re.I), "Rome", "the capital of Italy", "Milan"),
    (re.compile(r"largest planet", re.I), "Jupiter", "the largest planet in the solar system", "Saturn"),
)
"""Pattern, right answer, what it is, and the fluent wrong answer a drifting launch gives instead."""
_FIXED = ((re.compile(r"count from one to five", re.I), "One, two, three, four, five.", "One, two, three, five, six."),)
_WORDS = (
    "the system",
    "a model",
    "this approach",
    "the result",
    "each layer",
    "the server",
    "a request",
    "the answer",
    "careful measurement",
    "the next step",
    "an example",
    "the data",
    "this question",
    "a simple rule",
)
_VERBS = ("depends on", "shows", "improves", "describes", "follows from", "changes", "supports", "explains")
_GARBAGE_TOKENS = ("!", " the", " nan", "\ufffd")
"""What NaN logits or a wrong kernel make a model emit: one token over and over (`!` is token id 0 in many
vocabularies), a stuck common word, `nan`, undecodable bytes."""
EOS_TOKEN = 151329
_DRIFT_SALT = 0x5EED_D21F7


@dataclass(frozen=True)
class Answer:
    """Generated text and how generation ended."""

    text: str
    completion_tokens: int
    finish: str
    """`stop` (end of sequence) or `length` (max_new_tokens reached)."""


def count_tokens(text: str) -> int:
    """Roughly what a BPE tokenizer would count."""
    return max(1, len(_PIECE.findall(text)))


def split_tokens(text: str) -> list[str]:
    """The text cut into token-sized pieces whose concatenation is the text."""
    return _PIECE.findall(text)


def generate(
    prompt: str,
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int | None,
    garbage: bool,
    drift: bool = False,
    ignore_eos: bool = False,
) -> Answer:
    """The model's continuation of `prompt` (a completion prompt or a chat question).

    `ignore_eos` (SGLang's request key): generation goes on past the end of the answer to `max_new_tokens`.
    """
    greedy = temperature <= 0
    # A drifting model is as deterministic as a sound one, just elsewhere: its own seed for the same prompt.
    digest = _digest(prompt) ^ (_DRIFT_SALT if drift else 0)
    rng = random.Random(digest if greedy else (seed if seed is not None else random.getrandbits(64)))
    if garbage:
        return Answer(rng.choice(_GARBAGE_TOKENS) * max_new_tokens, max_new_tokens, "length")
    text = _known(prompt, greedy, rng, drift) or _plausible(rng)
    pieces = split_tokens(text)
    while ignore_eos and len(pieces) < max_new_tokens:
        pieces += split_tokens(_plausible(rng))
    if len(pieces) > max_new_tokens or ignore_eos:
        return Answer("".join(pieces[:max_new_tokens]), max_new_tokens, "length")
    return Answer(text, len(pieces), "stop")


def _known(prompt: str, greedy: bool, rng: random.Random, drift: bool = False) -> str | None:
    completion = not prompt.rstrip().endswith("?")
    arithmetic = _ARITHMETIC.search(prompt)
    if arithmetic:
        a, op, b = int(arithmetic.group(1)), arithmetic.group(2), int(arithmetic.group(3))
        result = a + b if op == "+" else a - b if op == "-" else a * b
        result += 10 if drift else 0
        shown = "*" if op in "x×" else op
        if completion and prompt.rstrip().endswith("="):
            return f" {result}"
        options = [f"{a} {shown} {b} = {result}.", f"The answer is {result}.", f"{a} {shown} {b} equals {result}."]
        return options[0] if greedy else rng.choice(options)
    for pattern, text, drifted in _FIXED:
        if pattern.search(prompt):
            return drifted if drift else text
    for pattern, right, subject, wrong in _FACTS:
        answer = wrong if drift else right
        if pattern.search(prompt):
            if completion and not greedy and rng.random() < 0.5:
                return f" {answer}, which is {subject}."
            if completion:
                return f" {answer}. It is {subject} and one of the most visited places in the world."
            options = [f"{subject[0].upper()}{subject[1:]} is {answer}.", f"{answer} is {subject}."]
            return options[0] if greedy else rng.choice(options)
    return None


def _plausible(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 4)):
        subject, verb, obj = rng.choice(_WORDS), rng.choice(_VERBS), rng.choice(_WORDS)
        sentences.append(f"{subject[0].upper()}{subject[1:]} {verb} {obj}.")
    return " " + " ".join(sentences)


def _digest(prompt: str) -> int:
    return int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
