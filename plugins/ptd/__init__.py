"""Progressive Tree Drafting (PTD): the target drafts for itself in its own verification pass.

``drafter`` is the ``ptd`` drafter, ``draft_tree`` the progressive draft tree that rides
in every forward, ``pool`` the pool of continuations the candidates come from, and
``plugin`` registers the drafter and the ``ptd`` and ``ptd-branches`` methods.
"""
