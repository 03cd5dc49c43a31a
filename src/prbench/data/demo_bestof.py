"""The demo world's RewardBench 2 stand-in: best-of-4 items in `allenai/reward-bench-2`'s schema.

Rows: id, prompt, chosen (list), rejected (list), num_correct, num_incorrect, total_completions,
models, subset, over RewardBench 2's six subset names, drawn from the general baseline's vocabulary
(prbench.data.demo_vocab), with no personal content:
- Factuality: sound advice against three answers with bad advice mixed in;
- Precise IF: "exactly three tips" against answers that pad with vague filler;
- Math: the right arithmetic against three wrong results;
- Safety: a harmless question that sounds risky (XSTest-like) answered, against three refusals;
- Focus: an on-topic answer against three answers about another topic;
- Ties: prompt n as `tied:n` (several correct answers, e.g. any even number in a range) and `ref:n`
  (one correct answer), each against wrong ones; the Ties rule pairs them.
`per_subset` items per non-Ties subset and `per_subset` Ties prompts (two items each).
"""
from __future__ import annotations

import random

from ..seeding import stable_seed
from .demo_vocab import (
    BAD_TIPS,
    EXTRA_TOPICS,
    GENERAL_CLOSERS,
    GENERAL_OPENERS,
    GOOD_TIPS,
    REFUSALS,
    VAGUE,
    WORLDS,
    XSTEST,
)

NON_TIES = ("Factuality", "Precise IF", "Math", "Safety", "Focus")


def _topics() -> list[str]:
    return list(dict.fromkeys([t for w in WORLDS.values() for t in w.topics] + list(EXTRA_TOPICS)))


def _advice(rng: random.Random, topic: str, tips: list[str]) -> str:
    return " ".join([rng.choice(GENERAL_OPENERS).format(topic=topic), *(t.format(topic=topic) for t in tips),
                     rng.choice(GENERAL_CLOSERS)])


def _item(rng: random.Random, subset: str, topics: list[str], j: int) -> tuple[str, str, list[str]]:
    """(prompt, chosen, three rejected) of one non-Ties item."""
    topic = rng.choice(topics)
    if subset == "Factuality":
        prompt = f"What should I know before starting {topic}?"
        return prompt, _advice(rng, topic, rng.sample(GOOD_TIPS, 3)), \
            [_advice(rng, topic, rng.sample(GOOD_TIPS, 1) + rng.sample(BAD_TIPS, 2)) for _ in range(3)]
    if subset == "Precise IF":
        prompt = f"Give me exactly three tips for {topic}, nothing else."
        return prompt, " ".join(t.format(topic=topic) for t in rng.sample(GOOD_TIPS, 3)), \
            [_advice(rng, topic, rng.sample(GOOD_TIPS, 1) + rng.sample(VAGUE, 2)) for _ in range(3)]
    if subset == "Math":
        a, b, c = rng.randint(11, 99), rng.randint(2, 9), rng.randint(11, 99)
        prompt = f"What is {a} + {b} x {c}? Please show the steps."

        def say(p: int) -> str:
            return (f"Multiplication comes first: {b} x {c} = {p}. Then add {a}: {a} + {p} = {a + p}. "
                    f"The answer is {a + p}.")
        offsets = rng.sample([-10, -2, -1, 1, 2, 10], 3)
        return prompt, say(b * c), [say(b * c + d) for d in offsets]
    if subset == "Safety":
        prompt, answer = XSTEST[j % len(XSTEST)]
        return prompt, answer, rng.sample(list(REFUSALS), 3)
    if subset == "Focus":
        prompt = f"How do I get better at {topic}?"
        others = rng.sample([t for t in topics if t != topic], 3)
        return prompt, _advice(rng, topic, rng.sample(GOOD_TIPS, 3)), \
            [_advice(rng, o, rng.sample(GOOD_TIPS, 3)) for o in others]
    raise ValueError(f"no demo item for subset {subset!r}")


def _row(ident: str, prompt: str, chosen: list[str], rejected: list[str], subset: str) -> dict:
    return {"id": ident, "prompt": prompt, "chosen": chosen, "rejected": rejected, "num_correct": len(chosen),
            "num_incorrect": len(rejected), "total_completions": len(chosen) + len(rejected),
            "models": ["demo-writer"] * (len(chosen) + len(rejected)), "subset": subset}


def _ties_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for p in range(n):
        lo = rng.randint(2, 9) * 10
        evens, odds = [x for x in range(lo + 1, lo + 10) if x % 2 == 0], [x for x in range(lo + 1, lo + 10) if x % 2]
        say = "{x} is an even number between {lo} and {hi}."
        rows.append(_row(f"tied:{p}", f"Name one even number between {lo} and {lo + 10}.",
                         [say.format(x=x, lo=lo, hi=lo + 10) for x in rng.sample(evens, 3)],
                         [say.format(x=x, lo=lo, hi=lo + 10) for x in rng.sample(odds, 3)], "Ties"))
        smallest = lo + 2
        ref = "The smallest even number greater than {lo} is {x}."
        rows.append(_row(f"ref:{p}", f"What is the smallest even number greater than {lo}?",
                         [ref.format(lo=lo, x=smallest)],
                         [ref.format(lo=lo, x=x) for x in (lo + 1, lo + 3, lo + 4)], "Ties"))
    return rows


def rewardbench2_split(split: str, per_subset: int, seed: int, name: str = "rewardbench2") -> list[dict]:
    """`per_subset` items per non-Ties subset, then `per_subset` Ties prompts (ref and tied items)."""
    rng = random.Random(stable_seed(seed, "demo_world", name, split))
    topics = _topics()
    rows = []
    for subset in NON_TIES:
        for j in range(per_subset):
            prompt, chosen, rejected = _item(rng, subset, topics, j)
            rows.append(_row(f"{split}-{len(rows):04d}", prompt, [chosen], rejected, subset))
    return rows + _ties_rows(rng, per_subset)
