"""The target models specmix loads itself: by HF id, local directory or GGUF file, and the
embedded default (SmolLM2-135M-Instruct, converted once from its PyPI wheel). A model loaded
here is specmix's own, so the target may switch it to the fast paths in place
(:func:`~specmix.models.loading.loaded_by_specmix`); a model a caller passes is never changed."""
