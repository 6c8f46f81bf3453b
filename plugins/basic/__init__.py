"""Plain decoding and the parts every method family shares: the ``none`` drafter, the
``drafted``, ``chain`` and ``best-first`` (DDTree) builders, the ``all`` and ``budget``
selectors, the ``tree`` verifier, and the ``vanilla`` method."""
