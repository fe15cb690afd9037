"""Text data of the language-model experiment: logic generator, synthetic stories, story loaders."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from probe.errors import ProbeError
from probe_train.text import LogicExample, generate_logic, load_stories, synthetic_stories
from probe_train.text.logic import CONCEPTS, EXTRA_CONCEPTS

RULE = re.compile(r"Every (\w+) is (not )?(?:an? )?(\w+)\.")
FACT = re.compile(r"([A-Z]\w*) is (not )?(?:an? )?(\w+)\.")


@pytest.fixture(scope="module")
def examples() -> list[LogicExample]:
    return generate_logic(500, min_hops=1, max_hops=5, distractors=3, seed=7)


def parse(sentence: str) -> tuple[str, str, str, bool]:
    """('rule', antecedent, consequent, positive) or ('fact', entity, predicate, positive)."""
    if m := RULE.fullmatch(sentence):
        return "rule", m[1], m[3], not m[2]
    m = FACT.fullmatch(sentence)
    assert m and m[1] != "Every", f"unparsable sentence: {sentence!r}"
    return "fact", m[1], m[3], not m[2]


def prove(context: tuple[str, ...]) -> tuple[str, set[tuple[str, bool]]]:
    """Forward-chain the context to a fixed point: the entity and all (predicate, positive) derived."""
    rules, facts = [], []
    for s in context:
        kind, a, b, pos = parse(s)
        (rules if kind == "rule" else facts).append((a, b, pos))
    assert len(facts) == 1, "exactly one fact"
    entity, pred, pos = facts[0]
    known = {(pred, pos)}
    while True:
        new = {(b, p) for a, b, p in rules if (a, True) in known} - known
        if not new:
            return entity, known
        known |= new


def test_deterministic_by_seed():
    assert generate_logic(50, seed=3) == generate_logic(50, seed=3)
    assert generate_logic(50, seed=3) != generate_logic(50, seed=4)
    assert generate_logic(0) == []


def test_hops_cover_the_range(examples):
    counts = Counter(ex.hops for ex in examples)
    assert set(counts) == {1, 2, 3, 4, 5}
    assert all(c > 50 for c in counts.values())  # uniform: ~100 each
    assert {ex.hops for ex in generate_logic(40, min_hops=3, max_hops=3)} == {3}


def test_answers_balanced(examples):
    n_true = sum(ex.answer for ex in examples)
    assert n_true == 250
    for hops in range(1, 6):
        sub = [ex.answer for ex in examples if ex.hops == hops]
        assert 0.3 < sum(sub) / len(sub) < 0.7


def test_independent_prover_decides_every_query(examples):
    for ex in examples:
        entity, known = prove(ex.context)
        _, q_entity, target, q_pos = parse(ex.query)
        assert q_pos and q_entity == entity
        assert not ((target, True) in known and (target, False) in known), ex.text
        assert ((target, True) in known) == ex.answer, ex.text
        assert ((target, False) in known) == (not ex.answer), ex.text
        # the context holds nothing contradictory at all, distractors included
        assert not any((p, not pos) in known for p, pos in known), ex.text
        assert len(ex.context) == len(set(ex.context)) == ex.hops + 1 + 3


def test_chain_is_a_valid_proof(examples):
    for ex in examples:
        chain = ex.chain
        assert len(chain) == 1 + 2 * ex.hops
        assert chain[0] in ex.context
        kind, entity, current, pos = parse(chain[0])
        assert kind == "fact" and pos
        for step in range(ex.hops):
            rule, conclusion = chain[1 + 2 * step], chain[2 + 2 * step]
            assert rule in ex.context
            _, ant, cons, rule_pos = parse(rule)
            assert ant == current  # modus ponens on the previous line: entity is `ant`
            assert parse(conclusion) == ("fact", entity, cons, rule_pos)
            current = cons
            if step < ex.hops - 1:
                assert rule_pos, "only the last step may be negative"
        assert parse(chain[-1])[2] == parse(ex.query)[2]
        assert parse(chain[-1])[3] == ex.answer


def test_text_format(examples):
    for ex in examples[:50]:
        answer = "true" if ex.answer else "false"
        assert ex.text.startswith(" ".join(ex.context) + " True or false: " + ex.query + " ")
        assert ex.text.endswith(f" The answer is {answer}.")
        assert ex.text.count("So ") == ex.hops
        assert "So " + ex.chain[-1] in ex.text
        assert "\n" not in ex.text


def test_articles_and_vocabulary():
    exs = generate_logic(300, max_hops=8, distractors=4, seed=1)
    words = set(re.findall(r"\b[a-z]+\b", " ".join(ex.text for ex in exs)))
    assert not re.search(r"\ba [aeiou]", " ".join(ex.text for ex in exs))
    assert len(words & set(CONCEPTS)) >= 20
    # very deep chains draw on the syllable-built concepts
    deep = generate_logic(5, min_hops=40, max_hops=40, seed=2)
    assert all(ex.hops == 40 and prove(ex.context)[1] for ex in deep)


@pytest.mark.parametrize("kwargs", [
    dict(n=-1), dict(n=5, min_hops=0), dict(n=5, min_hops=3, max_hops=2), dict(n=5, distractors=-1),
    dict(n=5, max_hops=10_000),
])
def test_bad_logic_arguments(kwargs):
    n = kwargs.pop("n")
    with pytest.raises(ProbeError):
        generate_logic(n, **kwargs)


# --- stories -------------------------------------------------------------------------------------

def test_synthetic_stories():
    stories = synthetic_stories(300, seed=5)
    assert stories == synthetic_stories(300, seed=5)
    assert stories != synthetic_stories(300, seed=6)
    assert len(stories) == 300 and len(set(stories)) == 300
    lengths = [len(s.split()) for s in stories]
    assert min(lengths) >= 40 and max(lengths) <= 170
    text = " ".join(stories)
    concepts = set(CONCEPTS) | set(EXTRA_CONCEPTS)
    assert not concepts & set(re.findall(r"[a-z]+", text.lower()))
    assert not re.search(r"pus\b", text)
    firsts = {re.split(r"(?<=[.!?]) ", s)[0] for s in stories}
    assert len(firsts) > 0.5 * len(stories)
    assert len(set(re.findall(r"[a-z]+", text.lower()))) > 250
    assert synthetic_stories(0) == []
    with pytest.raises(ProbeError):
        synthetic_stories(-1)


def test_load_synthetic():
    assert load_stories("synthetic", limit=7, seed=2) == synthetic_stories(7, 2)
    assert len(load_stories("synthetic")) == 2000


def test_load_txt_endoftext(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("First story.\nStill first.\n<|endoftext|>\n\nSecond one.\n  <|endoftext|>  \n"
                 "\n<|endoftext|>\nThird.\n")
    assert load_stories(str(f)) == ["First story.\nStill first.", "Second one.", "Third."]


def test_load_txt_blank_lines(tmp_path):
    f = tmp_path / "b.txt"
    f.write_text("  One.\nMore of one.\n\nTwo.\n \n\n\nThree.\n\n")
    assert load_stories(str(f)) == ["One.\nMore of one.", "Two.", "Three."]
    assert load_stories(str(f), limit=2) == ["One.\nMore of one.", "Two."]


def test_load_jsonl(tmp_path):
    f = tmp_path / "c.jsonl"
    rows = [{"text": " A. ", "story": "no"}, {"story": "B."}, {"id": 3, "body": "C."}, {"text": "   "}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert load_stories(str(f)) == ["A.", "B.", "C."]


def test_load_directory(tmp_path):
    (tmp_path / "b.txt").write_text("Two.\n\nThree.")
    (tmp_path / "a.jsonl").write_text('{"text": "One."}\n')
    (tmp_path / "skip.md").write_text("Not a story.")
    assert load_stories(str(tmp_path)) == ["One.", "Two.", "Three."]
    assert load_stories(str(tmp_path), limit=1) == ["One."]


def test_load_errors(tmp_path):
    with pytest.raises(ProbeError, match="no such file"):
        load_stories(str(tmp_path / "missing.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n<|endoftext|>\n")
    with pytest.raises(ProbeError, match="no stories"):
        load_stories(str(empty))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n\n{"text": oops}\n')
    with pytest.raises(ProbeError, match=r"bad\.jsonl: line 3\b") as err:
        load_stories(str(bad))
    assert "\n" not in str(err.value)
    other = tmp_path / "x.csv"
    other.write_text("a,b")
    with pytest.raises(ProbeError, match="unsupported"):
        load_stories(str(other))
    with pytest.raises(ProbeError, match="limit"):
        load_stories("synthetic", limit=0)
    (tmp_path / "sub").mkdir()
    with pytest.raises(ProbeError, match="no stories"):
        load_stories(str(tmp_path / "sub"))


def test_tinystories_without_datasets(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *args, **kw):
        if name == "datasets":
            raise ImportError(name)
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(ProbeError, match="pip install datasets"):
        load_stories("tinystories", limit=3)
