"""A replica judge that answers in the rubric format: the tiny Qwen2 replica of the judge model,
fine-tuned a few hundred seeded CPU steps so that the LLM judge's whole path (prompt, parser, sampled
retry, failure counting, cache) runs offline on it (replica spec option `judge_training`).

It is a *format* replica, not a quality judge. The training prompts are rendered exactly as the
LLM judge renders them (prbench.prompts.rubric_messages + the tokenizer's chat template, under the
replica config's `judge.aspect_format`, `judge.system_turn` and `prompts.templates`); the questions,
answers and rubric aspects come from the replica personalized data generator (a seed namespace of
its own) plus random texts decoded from the replica vocabulary (the random policy replicas write
such texts). Target replies (the loss is on the reply tokens only):

- well-formed: a bare list of 0/1/2 ratings, one per aspect (the `joined` format's reply) or
  "Aspect i: r" lines (the `numbered` format's); the ratings are a fixed function of the answer
  (code point of its first / last character mod 3, alternating over the aspects), so they vary;
- malformed (prose without a digit, which no judge.aggregate can parse): a share `malformed` of the
  items whose question contains the word `cue` (default: the replica questions that ask for a first project). The cue
  items' greedy reply is then prose (a failure), and the judge's sampled retry sometimes draws the
  well-formed list the rest of those items were trained on (a retry that parses).
"""
from __future__ import annotations

import logging
import random
from pathlib import Path

from ..config import with_defaults
from ..prompts import render_chat, rubric_messages
from ..seeding import stable_seed
from .data import PERSONALIZED_SUBSETS, personalized_rows

log = logging.getLogger("prbench.replica")

# replies without a digit, all starting with the same word (one first token carries the malformed share)
PROSE_REPLIES = ["The answer reads well but I will not give ratings for it.",
                 "The answer is hard to rate against these aspects.",
                 "The answer needs more detail before it can be rated."]


def judge_training_options(options: dict | None) -> dict:
    """`judge_training` validated, with the schema's defaults (config key
    replica.models.<name>.judge_training); a bad key or value raises ConfigError naming it."""
    return with_defaults(options or {}, "replica.models.*.judge_training")


def reply_ratings(answer: str, n_aspects: int) -> list[int]:
    """The well-formed reply's ratings: a fixed function of the answer (first / last character)."""
    text = answer.strip() or " "
    return [ord(text[0] if j % 2 == 0 else text[-1]) % 3 for j in range(n_aspects)]


def well_formed_reply(ratings: list[int], aspect_format: str) -> str:
    if aspect_format == "joined":
        return "[" + ", ".join(map(str, ratings)) + "]"
    return "\n".join(f"Aspect {i}: {r}" for i, r in enumerate(ratings, 1))


def training_items(seed: int, n: int, tokenizer, cue: str, malformed: float,
                   aspect_format: str) -> list[dict]:
    """n seeded (question, answer, aspects, reply, malformed) training items."""
    rng = random.Random(stable_seed(seed, "replica-judge-items"))
    rows = []
    per = max(1, n // (2 * len(PERSONALIZED_SUBSETS))) + 1
    for subset in PERSONALIZED_SUBSETS:
        for split in ("judge-a", "judge-b"):
            rows += personalized_rows(subset, split, per, seed)
    specials = set(tokenizer.all_special_ids)
    vocab = [i for i in range(len(tokenizer)) if i not in specials]
    items = []
    for k in range(n):
        row = rows[k % len(rows)]
        kind = rng.random()
        if kind < 0.35:
            answer = row["chosen"]
        elif kind < 0.6:
            answer = row["rejected"]
        else:  # random text of the kind the random-weight policy replicas write
            ids = [rng.choice(vocab) for _ in range(rng.randint(2, 24))]
            answer = tokenizer.decode(ids, skip_special_tokens=True).strip() or "ok"
        aspects = [a["aspect"] for a in row["rubric_aspects"]]
        bad = cue.lower() in row["question"].lower() and rng.random() < malformed
        reply = rng.choice(PROSE_REPLIES) if bad else well_formed_reply(reply_ratings(answer, len(aspects)),
                                                                        aspect_format)
        items.append({"question": row["question"], "answer": answer, "aspects": aspects, "reply": reply,
                      "malformed": bad})
    return items


def train_judge_replica(model, tokenizer, seed: int, options: dict, aspect_format: str = "numbered",
                        system_turn: bool = False) -> dict:
    """Fine-tune `model` in place on the rubric format (seeded, CPU, one thread for bitwise
    repeatability); returns a summary (steps, first / last loss, malformed share of the items)."""
    import torch

    opts = judge_training_options(options)
    items = training_items(seed, int(opts["examples"]), tokenizer, str(opts["cue"]), float(opts["malformed"]),
                           aspect_format)
    end = tokenizer.eos_token
    seqs = []
    for it in items:
        prompt = render_chat(tokenizer, rubric_messages(it["question"], it["answer"], it["aspects"],
                                                        aspect_format=aspect_format, system_turn=system_turn),
                             add_generation_prompt=True)
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        r = tokenizer(it["reply"] + end, add_special_tokens=False)["input_ids"]
        seqs.append((p + r, [-100] * len(p) + r))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(stable_seed(seed, "replica-judge-train"))
        gen = torch.Generator().manual_seed(stable_seed(seed, "replica-judge-batches"))
        opt = torch.optim.AdamW(model.parameters(), lr=float(opts["lr"]), weight_decay=0.0)
        model.train()
        pad = tokenizer.pad_token_id
        losses = []
        bs = int(opts["batch_size"])
        for step in range(int(opts["steps"])):
            idx = torch.randint(len(seqs), (bs,), generator=gen).tolist()
            width = max(len(seqs[i][0]) for i in idx)
            ids = torch.full((bs, width), pad, dtype=torch.long)
            labels = torch.full((bs, width), -100, dtype=torch.long)
            mask = torch.zeros((bs, width), dtype=torch.long)
            for row, i in enumerate(idx):
                x, y = seqs[i]
                ids[row, :len(x)] = torch.tensor(x)
                labels[row, :len(y)] = torch.tensor(y)
                mask[row, :len(x)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if step % 50 == 0 or step == int(opts["steps"]) - 1:
                log.info("replica judge: step %d loss %.4f", step, losses[-1])
    finally:
        torch.set_num_threads(threads)
    model.eval()
    return {"steps": int(opts["steps"]), "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None, "items": len(items),
            "malformed_items": sum(it["malformed"] for it in items), "options": opts,
            "aspect_format": aspect_format, "system_turn": bool(system_turn)}


def write_summary(out: Path, summary: dict) -> None:
    import json

    with open(Path(out) / "judge_training.json", "w") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
