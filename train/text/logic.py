"""PrOntoQA-style logic documents: fictional ontologies, one question, its proof.

Our own generator in the spirit of PrOntoQA (Saparov & He, 2023). The concepts are made-up
words (``wumpus``, ``tumpus``, ...) so that a model cannot answer from world knowledge: every
question must be decided by forward chaining (modus ponens) over the context.

Sentence forms (``X``, ``Y`` concepts, ``P`` a property adjective, ``E`` an entity name;
"an" replaces "a" before a vowel)::

    rule           Every X is a Y.      Every X is not a Y.      Every X is P.      Every X is not P.
    fact / query   E is a X.            (the query is always positive: "E is a Y." or "E is P.")
    conclusion     E is a Y.            E is not a Y.            E is P.            E is not P.

Document format (:attr:`LogicExample.text`), one line, sentences joined by single spaces::

    <context> True or false: <query> <proof> The answer is true|false.

where the proof is :attr:`LogicExample.chain` with every derived sentence prefixed by "So ",
e.g. (2 hops, false)::

    Every slumpus is not small. Hugo is a florpus. Every florpus is a slumpus. Every gorpus is small.
    True or false: Hugo is small. Hugo is a florpus. Every florpus is a slumpus. So Hugo is a slumpus.
    Every slumpus is not small. So Hugo is not small. The answer is false.

(the example's context has one distractor; it is shown wrapped here, the real text is one line).

A ``hops``-step example uses ``hops`` chain concepts ``c0 .. c{hops-1}`` and a target ``T``
(a concept or a property): the fact "E is a c0.", the rules "Every c_i is a c_{i+1}." and a
last rule "Every c_{hops-1} is [not] T." whose polarity is the answer. Distractor rules only
have antecedents the entity never reaches, so they never fire: the proof is unique and the
query can never be both provable and disprovable. The first distractor always concludes the
target with the opposite polarity, so the answer cannot be read off the polarity of a rule
that mentions the target.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from probe.errors import ProbeError

#: Fictional concepts, used first; :data:`EXTRA_CONCEPTS` only when an example needs more.
CONCEPTS: tuple[str, ...] = (
    "wumpus", "yumpus", "zumpus", "dumpus", "rompus", "numpus", "tumpus", "vumpus", "impus",
    "jompus", "gorpus", "shumpus", "lempus", "sterpus", "grimpus", "lorpus", "brimpus", "kempus",
    "fimpus", "bompus", "rempus", "sompus", "timpus", "yempus", "zhompus", "quimpus", "prumpus",
    "slumpus", "florpus", "drompus",
)
#: Further concepts built from syllables (onset + vowel + "mpus"), deterministic, no repeats.
EXTRA_CONCEPTS: tuple[str, ...] = tuple(dict.fromkeys(
    w for o in ("b", "bl", "br", "d", "dr", "f", "fl", "g", "gl", "gr", "h", "j", "k", "l", "m",
                "n", "p", "pl", "r", "s", "sl", "st", "t", "tr", "v", "w", "y", "z")
    for v in "aeiou" for w in [f"{o}{v}mpus"] if w not in CONCEPTS))
ENTITIES: tuple[str, ...] = (
    "Max", "Sally", "Alex", "Fae", "Rex", "Sam", "Polly", "Stella", "Wren", "Jade", "Quinn",
    "Hugo", "Nora", "Otto", "Ivy", "Zed",
)
PROPERTIES: tuple[str, ...] = (
    "red", "blue", "green", "small", "large", "happy", "sad", "wooden", "metallic", "bright",
    "dull", "hot", "cold", "fast", "slow", "kind", "shy", "loud", "quiet", "sweet", "sour",
    "bitter", "spicy", "fruity", "floral", "liquid", "opaque", "transparent", "nervous", "feisty",
)
_PROPERTY_SET = frozenset(PROPERTIES)
_ALL_CONCEPTS = CONCEPTS + EXTRA_CONCEPTS


@dataclass(frozen=True)
class LogicExample:
    """One question with its context and proof.

    Attributes
    ----------
    context : tuple of str
        The rules and the single fact, distractors included, in shuffled order.
    query : str
        The positive statement asked about, e.g. ``"Max is a dumpus."``.
    answer : bool
        True when the query is proved, False when its negation is.
    chain : tuple of str
        The proof: the fact, then (rule used, conclusion) pairs; the last conclusion is the
        query (true) or its negation (false). ``len(chain) == 1 + 2 * hops``.
    hops : int
        Modus-ponens steps in ``chain``.
    """

    context: tuple[str, ...]
    query: str
    answer: bool
    chain: tuple[str, ...]
    hops: int

    @property
    def prompt(self) -> str:
        """The document up to the question (what a model sees before it must reason)."""
        return f"{' '.join(self.context)} True or false: {self.query}"

    @property
    def text(self) -> str:
        """The whole training document, in the format of the module docstring."""
        proof = " ".join(s if i % 2 else ("So " + s if i else s) for i, s in enumerate(self.chain))
        return f"{self.prompt} {proof} The answer is {'true' if self.answer else 'false'}."


def _say(subject: str, word: str, negated: bool = False) -> str:
    """``"<subject> is [not] <word>."``, with an article unless ``word`` is a property."""
    noun = word if word in _PROPERTY_SET else f"{'an' if word[0] in 'aeiou' else 'a'} {word}"
    return f"{subject} is {'not ' if negated else ''}{noun}."


def _example(rng: random.Random, hops: int, answer: bool, distractors: int) -> LogicExample:
    pool = CONCEPTS if hops + 2 <= len(CONCEPTS) else _ALL_CONCEPTS
    n_other = min(distractors, len(pool) - hops - 1)
    picked = rng.sample(pool, hops + 1 + n_other)
    chain_concepts, others = picked[:hops], picked[hops + 1:]
    # A property target half of the time: facts about properties end chains (as in PrOntoQA).
    target = rng.choice(PROPERTIES) if rng.random() < 0.5 else picked[hops]
    entity = rng.choice(ENTITIES)

    rules = [_say(f"Every {a}", b) for a, b in zip(chain_concepts, chain_concepts[1:])]
    rules.append(_say(f"Every {chain_concepts[-1]}", target, negated=not answer))
    fact = _say(entity, chain_concepts[0])
    chain = [fact]
    for i, rule in enumerate(rules):
        last = i == hops - 1
        chain += [rule, _say(entity, target if last else chain_concepts[i + 1], negated=last and not answer)]

    # Distractors: antecedents from ``others`` only (never derived for the entity), so they
    # cannot fire; consequents may mention chain concepts and the target to look relevant.
    seen: set[tuple[str, str]] = set()
    extra: list[str] = []
    attempts = 0
    while len(extra) < distractors:
        attempts += 1
        if attempts > 100 * distractors:
            raise ProbeError(f"cannot place {distractors} distinct distractor rules; use fewer distractors")
        ant = others[len(extra) % len(others)]
        if not extra:  # the target with the opposite polarity (see the module docstring)
            cons, neg = target, answer
        else:
            r = rng.random()
            cons = (rng.choice(chain_concepts + [target]) if r < 0.4
                    else rng.choice(PROPERTIES) if r < 0.7 else rng.choice(pool))
            neg = rng.random() < 0.5
        if cons != ant and (ant, cons) not in seen:
            seen.add((ant, cons))
            extra.append(_say(f"Every {ant}", cons, negated=neg))

    context = [fact, *rules, *extra]
    rng.shuffle(context)
    return LogicExample(tuple(context), _say(entity, target), answer, tuple(chain), hops)


def generate_logic(n: int, *, min_hops: int = 1, max_hops: int = 5, distractors: int = 2,
                   seed: int = 0) -> list[LogicExample]:
    """Generate ``n`` logic questions, deterministically from ``seed``.

    Parameters
    ----------
    n : int
        Number of examples (>= 0).
    min_hops, max_hops : int
        Each example's hop count is drawn uniformly from ``min_hops .. max_hops`` (inclusive),
        so the model sees proofs of every depth in the range.
    distractors : int
        Irrelevant rules added to each context, so that the relevant rules must be found by
        chaining rather than by position or by being the only rules present.
    seed : int
        Seed of a private :class:`random.Random`; global random state is neither used nor changed.

    Returns
    -------
    list of LogicExample
        Exactly half true answers (one more true for odd ``n``), in random order.

    Raises
    ------
    ProbeError
        On a negative ``n`` or ``distractors``, hops outside ``1 <= min_hops <= max_hops``, or
        more hops than there are concepts.
    """
    if n < 0:
        raise ProbeError(f"n must be >= 0, not {n}")
    if not 1 <= min_hops <= max_hops:
        raise ProbeError(f"need 1 <= min_hops <= max_hops, got min_hops={min_hops}, max_hops={max_hops}")
    if max_hops + 2 > len(_ALL_CONCEPTS):
        raise ProbeError(f"max_hops must be at most {len(_ALL_CONCEPTS) - 2}, not {max_hops}")
    if distractors < 0:
        raise ProbeError(f"distractors must be >= 0, not {distractors}")
    rng = random.Random(seed)
    answers = [i % 2 == 0 for i in range(n)]
    rng.shuffle(answers)  # balanced labels, so a constant guess scores exactly chance
    return [_example(rng, rng.randint(min_hops, max_hops), a, distractors) for a in answers]
