"""``specmix bench``: timing methods on the same prompts (:mod:`~specmix.bench.runner`), the
benchmark prompt sets (:mod:`~specmix.bench.prompts`) and the reports (:mod:`~specmix.bench.report`)."""
