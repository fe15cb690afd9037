"""Text sources of the language-model experiment: PrOntoQA-style logic and children's stories."""
from .logic import LogicExample, generate_logic
from .stories import load_stories, synthetic_stories

__all__ = ["generate_logic", "LogicExample", "synthetic_stories", "load_stories"]
