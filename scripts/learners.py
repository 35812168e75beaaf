"""Learners for scripts/eval_learned.py (pure): each takes (features, category) examples and returns a predictor,
features -> (category, confidence in 0..1). Plain Python: the measurement must show what a run-time model without
numpy could do.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable

from orchestrator.knowledge import public_logs

Example = tuple[frozenset[str], str]
Predictor = Callable[[frozenset[str]], tuple[str, float]]


def naive_bayes(examples: list[Example], alpha: float = 0.5) -> Predictor:
    """Multinomial naive Bayes over present words (Bernoulli-free: absent words say nothing)."""
    by_cat: dict[str, Counter[str]] = defaultdict(Counter)
    docs: Counter[str] = Counter()
    vocab: set[str] = set()
    for ws, cat in examples:
        by_cat[cat].update(ws)
        docs[cat] += 1
        vocab |= ws
    total = sum(docs.values())
    v = len(vocab) + 1
    prior = {c: math.log(n / total) for c, n in docs.items()}
    denom = {c: math.log(sum(by_cat[c].values()) + alpha * v) for c in docs}

    def predict(ws: frozenset[str]) -> tuple[str, float]:
        known = [w for w in ws if w in vocab]
        scores = {c: prior[c] + sum(math.log(by_cat[c][w] + alpha) - denom[c] for w in known) for c in docs}
        return _softmax_top(scores)

    return predict


def logistic(examples: list[Example], epochs: int = 30, rate: float = 0.2, l2: float = 1e-3) -> Predictor:
    """Softmax regression on binary word features, plain SGD with L2 (a fixed order: reproducible)."""
    cats = sorted({c for _, c in examples})
    weights: dict[str, dict[str, float]] = {c: defaultdict(float) for c in cats}
    bias = dict.fromkeys(cats, 0.0)
    order = sorted(examples, key=lambda e: (e[1], sorted(e[0])))
    order = [order[(i * 7919) % len(order)] for i in range(len(order))] if len(order) % 7919 else order
    for epoch in range(epochs):
        step = rate / (1 + epoch * 0.1)
        for ws, cat in order:
            scores = {c: bias[c] + sum(weights[c].get(w, 0.0) for w in ws) for c in cats}
            probs = _softmax(scores)
            for c in cats:
                g = probs[c] - (1.0 if c == cat else 0.0)
                if abs(g) < 1e-4:
                    continue
                bias[c] -= step * g
                wc = weights[c]
                for w in ws:
                    wc[w] = wc.get(w, 0.0) * (1 - step * l2) - step * g

    def predict(ws: frozenset[str]) -> tuple[str, float]:
        return _softmax_top({c: bias[c] + sum(weights[c].get(w, 0.0) for w in ws) for c in cats})

    return predict


def knn(examples: list[Example], k: int = 1) -> Predictor:
    """The nearest labelled examples by the `similar` corpus's weighted cosine; confidence is the score."""
    corpus = public_logs.Corpus([public_logs.PublicLog(str(i), "", c, "", ws, "") for i, (ws, c) in
                                 enumerate(examples)])

    def predict(ws: frozenset[str]) -> tuple[str, float]:
        near = corpus.nearest(ws, threshold=0.0)[:k]
        if not near:
            return "unknown", 0.0
        votes: dict[str, float] = defaultdict(float)
        for n in near:
            votes[n.log.category] += n.score
        cat = max(votes, key=lambda c: votes[c])
        score = votes[cat]
        return cat, score / len(near)

    return predict


def agreeing(examples: list[Example]) -> Predictor:
    """Naive Bayes where the nearest labelled example agrees with it, else no answer: two views of the words."""
    bayes, nearest = naive_bayes(examples), knn(examples)

    def predict(ws: frozenset[str]) -> tuple[str, float]:
        cat, conf = bayes(ws)
        return (cat, conf) if nearest(ws)[0] == cat else ("unknown", 0.0)

    return predict


def abstain(ws: frozenset[str]) -> tuple[str, float]:
    """The predictor of no examples: it never answers."""
    return "unknown", 0.0


def _softmax(scores: dict[str, float]) -> dict[str, float]:
    top = max(scores.values())
    exp = {c: math.exp(s - top) for c, s in scores.items()}
    total = sum(exp.values())
    return {c: e / total for c, e in exp.items()}


def _softmax_top(scores: dict[str, float]) -> tuple[str, float]:
    probs = _softmax(scores)
    cat = max(probs, key=lambda c: probs[c])
    return cat, probs[cat]


LEARNERS: dict[str, Callable[[list[Example]], Predictor]] = {
    "nb": naive_bayes,
    "nb0.1": lambda ex: naive_bayes(ex, 0.1),
    "logreg": logistic,
    "knn": knn,
    "knn3": lambda ex: knn(ex, 3),
    "nb&knn": agreeing,
}
