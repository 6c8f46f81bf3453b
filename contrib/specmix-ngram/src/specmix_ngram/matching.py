"""How long a match is: the evidence lookup odds are kept apart by."""

LONG_MATCH = 8


def agreement(source: list[int], end: int, context: list[int], matched: int) -> int:
    """How many tokens before ``end`` in ``source`` equal the context's last ones (at least ``matched``; up to LONG_MATCH)."""
    length = matched
    while (length < LONG_MATCH and end - length - 1 >= 0 and length < len(context)
           and source[end - length - 1] == context[-length - 1]):
        length += 1
    return length


def length_class(length: int) -> int:
    """1, 2 and 3 as they are; 4 for 4-7 tokens; 8 for 8 or more."""
    return length if length <= 3 else (4 if length < LONG_MATCH else LONG_MATCH)
