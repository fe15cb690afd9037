"""Children's stories: a built-in TinyStories-like generator and loaders for real story text.

The stories are the "memorization" side of the language-model experiment: ordinary text with
no logical structure, mixed with the logic documents of :mod:`probe_train.text.logic`. The synthetic
generator needs no download (tests, CPU runs); :func:`load_stories` also reads the real
TinyStories data set, the King James Version's narrative books (:mod:`probe_train.text.kjv`,
offline from a distribution package) or one's own files.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Callable

from probe.files import open_regular
from probe.limits import parse_json
from probe.errors import ProbeError

from .kjv import kjv_passages

EOS = "<|endoftext|>"

_GIRLS = ("Lily", "Mia", "Sue", "Anna", "Emma", "Lucy", "Zoe", "Sara", "Amy", "Kate", "Ella",
          "Rosie", "Molly", "Grace", "Ruby", "Lena", "Jenny", "Tara")
_BOYS = ("Tom", "Ben", "Jack", "Tim", "Leo", "Jake", "Finn", "Noah", "Luke", "Joe", "Bob", "Dan",
         "Billy", "Timmy", "Andy", "Ollie", "Sid", "Pete")
_ANIMALS = ("dog", "cat", "bunny", "bird", "duck", "frog", "puppy", "kitten", "bear", "fox", "owl",
            "mouse", "pig", "cow", "horse", "turtle", "squirrel", "lamb", "chick", "goat",
            "monkey", "lion", "deer", "hen", "snail", "butterfly")
_TOYS = ("ball", "kite", "doll", "teddy bear", "toy car", "truck", "boat", "yo-yo", "drum",
         "train", "robot", "balloon", "spinning top", "toy plane", "block tower", "jump rope")
_COLORS = ("red", "blue", "green", "yellow", "pink", "purple", "orange", "shiny", "little", "big")
_PLACES = ("park", "garden", "beach", "forest", "farm", "pond", "zoo", "hill", "lake",
           "playground", "backyard", "meadow", "river", "market", "woods")
_TRAITS = ("little", "happy", "curious", "kind", "brave", "shy", "silly", "cheerful", "clever",
           "sleepy", "friendly", "busy", "small", "gentle")
_WEATHER = ("sunny", "rainy", "windy", "snowy", "warm", "cold", "cloudy", "bright")
_FOODS = ("apple", "cookie", "cake", "sandwich", "banana", "carrot", "pie", "muffin",
          "ice cream", "pear", "cupcake", "pancake", "peach", "candy")
_ADULTS = ("mom", "dad", "grandma", "grandpa", "aunt", "uncle", "big sister", "big brother")
_GOOD = ("happy", "glad", "proud", "excited", "thankful", "calm")
_BAD = ("sad", "scared", "worried", "upset", "lonely", "grumpy")
_SPOTS = ("bench", "slide", "big tree", "bush", "rock", "swing", "table", "fence", "flowers")
_ACTIVITIES = ("play ball", "draw pictures", "sing songs", "dance", "run fast", "build sand castles",
               "read books", "jump in puddles", "climb trees", "play hide and seek", "fly a kite")
_SCARY = ("the dark", "thunder", "the big slide", "deep water", "the loud vacuum", "big waves",
          "the tall ladder", "the old barn")
_CHORES = ("cleaning the kitchen", "washing the dishes", "planting seeds", "folding clothes",
           "baking bread", "sweeping the floor", "feeding the hens", "picking berries")
_SCENES = ("The sun was bright and the birds were singing.", "There were tall trees and pretty flowers.",
           "The grass was soft and green.", "A cool wind was blowing.", "Many children were playing there.",
           "The sky was blue with white clouds.", "Bees were buzzing around the flowers.")
_LESSONS = ("sharing is good", "it is good to help", "being kind makes friends",
            "it is okay to ask for help", "being brave is fun", "friends make everything better")


def _a(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _maybe(rng: random.Random, sentence: str, p: float = 0.7) -> str:
    """``sentence`` with probability ``p``, else "": optional details vary length and wording."""
    return sentence if rng.random() < p else ""


def _character(rng: random.Random, exclude: str = "") -> dict[str, str]:
    """A child: name, noun and pronouns, so templates stay grammatical for girls and boys."""
    girl = rng.random() < 0.5
    name = rng.choice([n for n in (_GIRLS if girl else _BOYS) if n != exclude])
    return {"name": name, "kid": "girl" if girl else "boy", "he": "she" if girl else "he",
            "He": "She" if girl else "He", "his": "her" if girl else "his", "him": "her" if girl else "him"}


def _opening(rng: random.Random, c: dict[str, str]) -> str:
    n, who = c["name"], _a(f"{rng.choice(_TRAITS)} {c['kid']}")
    return rng.choice((
        f"Once upon a time, there was {who} named {n}.",
        f"{n} was {who} who lived in a small house by the {rng.choice(_PLACES)}.",
        f"There once was {who} called {n}.",
        f"In a little town, there lived {who} named {n}.",
        f"One {rng.choice(_WEATHER)} morning, {who} named {n} woke up early.",
        f"{n} was {who}. {c['He']} loved to {rng.choice(_ACTIVITIES)}.",
    ))


def _ending(rng: random.Random, c: dict[str, str], friend: str) -> str:
    n = c["name"]
    return rng.choice((
        "They were happy.", f"{n} smiled. It was the best day ever.",
        f"That night, {n} went to bed with a big smile.", f"{n} learned that {rng.choice(_LESSONS)}.",
        f"{n} and {friend} were very {rng.choice(_GOOD)}.", "They laughed and played until the sun went down.",
        f"{n} felt warm and {rng.choice(_GOOD)} inside.",
    ))


def _lost_toy(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, he, He, his = c["name"], c["he"], c["He"], c["his"]
    toy, animal, place = rng.choice(_TOYS), rng.choice(_ANIMALS), rng.choice(_PLACES)
    s1, s2 = rng.sample(_SPOTS, 2)
    leave = rng.choice(("ran away", "hopped off", "wagged its tail", "went home"))
    return [
        f"{He} had {_a(rng.choice(_COLORS))} {toy} that {he} loved very much.",
        f"One {rng.choice(_WEATHER)} day, {n} went to the {place} with {his} {rng.choice(_ADULTS)}.",
        _maybe(rng, rng.choice(_SCENES)),
        _maybe(rng, f"{n} played with the {toy} for a long time."),
        f"When it was time to go home, {n} could not find the {toy}.",
        f"{He} felt very {rng.choice(_BAD)}.",
        _maybe(rng, f"{He} looked under the {s1} and behind the {s2}."),
        f"Then {n} saw {_a(animal)}. The {animal} had the {toy}!",
        f'"Please give me my {toy}," said {n}.',
        f"The {animal} gave the {toy} back and {leave}.",
        f"{n} hugged {his} {toy} and said thank you.",
    ], f"the {animal}"


def _new_friend(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, he = c["name"], c["he"]
    animal, place, bad = rng.choice(_ANIMALS), rng.choice(_PLACES), rng.choice(_BAD)
    return [
        f"One day, {he} went to the {place} to {rng.choice(_ACTIVITIES)}.",
        _maybe(rng, rng.choice(_SCENES)),
        f"There {he} saw {_a(rng.choice(_TRAITS))} {animal} sitting all alone. The {animal} looked {bad}.",
        f'"Why are you {bad}?" asked {n}.',
        f'"I have no friends to play with," said the {animal}.',
        f'"I will be your friend," said {n}.',
        f"They {rng.choice(_ACTIVITIES)} together.",
        _maybe(rng, f"Then {n} shared {c['his']} {rng.choice(_FOODS)} with the {animal}. It was yummy."),
        f"From that day on, {n} and the {animal} played at the {place} every day.",
    ], f"the {animal}"


def _sharing(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, He, his = c["name"], c["He"], c["his"]
    f = _character(rng, exclude=n)
    food, adult = rng.choice(_FOODS), rng.choice(_ADULTS)
    return [
        f"{n} had a friend named {f['name']}. They liked to go to the {rng.choice(_PLACES)} together.",
        f"One day, {n}'s {adult} gave {c['him']} a big {food}.",
        f"{f['name']} did not have {_a(food)}. {f['He']} felt {rng.choice(_BAD)}.",
        f"At first, {n} wanted to keep the {food} all for {c['him']}self.",
        f"Then {c['he']} saw that {f['name']} was sad. {He} broke the {food} in two.",
        f'"Here, this is for you," said {n}.',
        f"{f['name']} smiled and said, \"Thank you, {n}!\"",
        _maybe(rng, f"{n}'s {adult} saw them and said, \"You are a good friend.\""),
        f"{n} felt {rng.choice(_GOOD)}. Sharing {his} {food} was better than eating it alone.",
    ], f["name"]


def _brave(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, he, He, his = c["name"], c["he"], c["He"], c["his"]
    fear, adult = rng.choice(_SCARY), rng.choice(_ADULTS)
    return [
        f"{n} was scared of {fear}. {He} did not like it at all.",
        f"One {rng.choice(_WEATHER)} day, {n} had to face {fear}.",
        f"{He} felt {rng.choice(_BAD)} and wanted to hide.",
        f'{his.capitalize()} {adult} held {his} hand and said, "Do not be afraid. I am here with you."',
        _maybe(rng, f"{n} took a deep breath and counted to {rng.choice(('three', 'five', 'ten'))}."),
        f"Then {he} tried, one small step at a time.",
        "It was not so bad. It was fun!",
        f"{n} laughed and said, \"I am not scared anymore!\"",
        f"{his.capitalize()} {adult} gave {c['him']} {_a(rng.choice(_FOODS))} because {he} was so brave.",
    ], f"{his} {adult}"


def _helping(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, he, He, his = c["name"], c["he"], c["He"], c["his"]
    adult, chore, food = rng.choice(_ADULTS), rng.choice(_CHORES), rng.choice(_FOODS)
    return [
        f"One {rng.choice(_WEATHER)} day, {n}'s {adult} was busy {chore}.",
        f"{n} wanted to help. \"Can I help you?\" {he} asked.",
        f'"Yes, please," said {his} {adult}.',
        _maybe(rng, f"{n} worked hard. {He} was careful and did not make a mess."),
        _maybe(rng, f"A little {rng.choice(_ANIMALS)} came to watch them."),
        f"Soon the work was done. {n}'s {adult} smiled.",
        f'"Thank you for helping me," {his} {adult} said, and gave {n} a yummy {food}.',
        f"{n} felt {rng.choice(_GOOD)}.",
    ], f"{his} {adult}"


def _rainy_trip(rng: random.Random, c: dict[str, str]) -> tuple[list[str], str]:
    n, he, He, his = c["name"], c["he"], c["He"], c["his"]
    place, toy, animal = rng.choice(_PLACES), rng.choice(_TOYS), rng.choice(_ANIMALS)
    return [
        f"{n} took {his} {rng.choice(_COLORS)} {toy} and went to the {place}.",
        _maybe(rng, rng.choice(_SCENES)),
        "Suddenly, big dark clouds came and it started to rain.",
        f"{n} ran under a big tree to stay dry. A wet {animal} was there too.",
        f'"Hello," said {n}. "Do you want to wait with me?"',
        _maybe(rng, f"The {animal} came closer. They waited together and watched the rain."),
        "Soon the rain stopped and the sun came out. There was a big rainbow in the sky!",
        f"{n} and the {animal} jumped in the puddles. {He} was all wet, but {he} did not mind.",
    ], f"the {animal}"


_SHAPES: tuple[Callable[[random.Random, dict[str, str]], tuple[list[str], str]], ...] = (
    _lost_toy, _new_friend, _sharing, _brave, _helping, _rainy_trip)


def _story(rng: random.Random) -> str:
    c = _character(rng)
    body, friend = rng.choice(_SHAPES)(rng, c)
    return " ".join(s for s in [_opening(rng, c), *body, _ending(rng, c, friend)] if s)


def synthetic_stories(n: int, seed: int = 0) -> list[str]:
    """``n`` short TinyStories-like stories, deterministic in ``seed``.

    Six story shapes (lost toy, new friend, sharing, being brave, helping, a rainy trip) with
    dozens of values per slot and randomly dropped sentences, so that the text is ordinary
    varied prose rather than a handful of repeated lines. No fictional logic concepts occur.

    Parameters
    ----------
    n : int
        Number of stories (>= 0).
    seed : int
        Seed of a private :class:`random.Random`.

    Returns
    -------
    list of str
        One story per item, roughly 50-150 words each.
    """
    if n < 0:
        raise ProbeError(f"n must be >= 0, not {n}")
    rng = random.Random(seed)
    return [_story(rng) for _ in range(n)]


def _split_txt(text: str) -> list[str]:
    """Stories of a .txt file: separated by ``<|endoftext|>`` lines, else by blank lines."""
    if any(line.strip() == EOS for line in text.splitlines()):
        return re.split(rf"^[ \t]*{re.escape(EOS)}[ \t]*$", text, flags=re.MULTILINE)
    return re.split(r"\n[ \t]*\n", text)


def _read_jsonl(path: Path, text: str) -> list[str]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, path, f"line {lineno}")
        except json.JSONDecodeError as e:
            raise ProbeError(f"{path}: line {lineno} is not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise ProbeError(f"{path}: line {lineno} is not a JSON object")
        story = obj.get("text", obj.get("story"))
        if not isinstance(story, str):
            story = next((v for v in obj.values() if isinstance(v, str)), None)
        if story is None:
            raise ProbeError(f"{path}: line {lineno} has no text field")
        out.append(story)
    return out


def _read_file(path: Path) -> list[str]:
    try:
        with open_regular(path, encoding="utf-8", what="stories file") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ProbeError(f"cannot read stories from {path}: {e}") from None
    if path.suffix == ".jsonl":
        return _read_jsonl(path, text)
    if path.suffix == ".txt":
        return _split_txt(text)
    raise ProbeError(f"{path}: unsupported story file (use .txt or .jsonl)")


def _tinystories(limit: int | None) -> list[str]:
    try:
        import datasets
    except ImportError:
        raise ProbeError("stories 'tinystories' need the datasets library: pip install datasets") from None
    try:
        data = datasets.load_dataset("roneneldan/TinyStories", split="train")
        n = len(data) if limit is None else min(limit, len(data))
        return list(data.select(range(n))["text"])
    except Exception as e:  # network, cache and hub errors all mean "no data"
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ProbeError(f"could not load TinyStories: {msg}") from None


def load_stories(source: str, *, limit: int | None = None, seed: int = 0) -> list[str]:
    """Stories from the built-in generator, TinyStories, the King James Version, or files.

    Parameters
    ----------
    source : str
        ``"synthetic"``: :func:`synthetic_stories` (``limit`` of them, 2000 by default).
        ``"tinystories"``: the TinyStories train split through the ``datasets`` library.
        ``"kjv"``: the King James Version's narrative books (Genesis-Esther, Matthew-Acts) in
        passages of about 175 words cut at verse boundaries, in canonical order
        (:func:`probe_train.text.kjv.kjv_passages`; needs Debian's ``bible-kjv-text``).
        Otherwise a path: a ``.jsonl`` file (one JSON object per line; its ``"text"`` field,
        else ``"story"``, else its first string value), a ``.txt`` file (stories separated
        by lines holding only ``<|endoftext|>``, or, if there are none, by blank lines), or a
        folder, whose ``*.txt`` and ``*.jsonl`` files are read in sorted order.
    limit : int, optional
        Keep at most this many stories (the first ones, after loading and cleaning).
    seed : int
        Seed of the synthetic generator; real data is returned in its own order.

    Returns
    -------
    list of str
        Non-empty stories with surrounding whitespace stripped.

    Raises
    ------
    ProbeError
        Unknown path, unreadable or malformed file (bad JSON names the file and line),
        missing ``datasets`` library or failed download, missing or failing ``bible`` program,
        or no stories at all.
    """
    if limit is not None and limit < 1:
        raise ProbeError(f"limit must be >= 1, not {limit}")
    if source == "synthetic":
        stories = synthetic_stories(2000 if limit is None else limit, seed)
    elif source == "tinystories":
        stories = _tinystories(limit)
    elif source == "kjv":
        stories = [text for _, text in kjv_passages()]
    else:
        path = Path(source)
        if path.is_dir():
            # a FIFO or device named like a stories file is refused (by _read_file), not skipped
            files = sorted(p for p in path.iterdir()
                           if p.exists() and not p.is_dir() and p.suffix in (".txt", ".jsonl"))
            stories = [s for f in files for s in _read_file(f)]
        elif path.exists():
            stories = _read_file(path)
        else:
            raise ProbeError(f"stories '{source}': no such file or folder (or use 'synthetic', 'tinystories' or 'kjv')")
    stories = [s.strip() for s in stories if s and s.strip()]
    if not stories:
        raise ProbeError(f"no stories found in '{source}'")
    return stories if limit is None else stories[:limit]
