"""Strategies for the project's own unit tests (the kit's live in specmix.testing.strategies)."""

from hypothesis import strategies as st

from specmix import TokenTree


@st.composite
def token_trees(draw, vocab_size: int = 16, max_size: int = 20) -> TokenTree:
    """Valid trees: each node hangs off an earlier one, with a token no sibling has."""
    size = draw(st.integers(1, max_size))
    tokens, parents = [draw(st.integers(0, vocab_size - 1))], [-1]
    used: dict[int, set[int]] = {0: set()}
    for node in range(1, size):
        parent = draw(st.integers(0, node - 1))
        free = [t for t in range(vocab_size) if t not in used[parent]]
        if not free:
            continue
        token = draw(st.sampled_from(free))
        used[parent].add(token)
        used[len(tokens)] = set()
        tokens.append(token)
        parents.append(parent)
    return TokenTree(tokens=tokens, parents=parents, vocab_size=vocab_size)
