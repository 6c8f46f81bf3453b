"""Built-in plugins, one subpackage per method family, each declared as an entry point in
group ``specmix`` like any third party's (``<family>/plugin.py`` holds its hooks):

- ``basic``: plain decoding and the shared parts: drafter ``none``, builders ``drafted``,
  ``chain`` and ``best-first``, selectors ``all`` and ``budget``, verifier ``tree``; method ``vanilla``.
- ``ptd``: Progressive Tree Drafting; methods ``ptd`` and ``ptd-branches``.
- ``diffusion``: the block-diffusion drafter, its network, training recipe and shipped
  weights; methods ``dflash`` and ``ddtree``.
- ``taps``: TAPS's candidate pool and learned selector, the scorer, its recipe and
  shipped weights; method ``taps``.
- ``trained``: what trained artifacts share: training prompt sets and weights directories.
"""
