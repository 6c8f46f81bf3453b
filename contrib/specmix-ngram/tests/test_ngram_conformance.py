from specmix.testing import ConformanceSuite


class TestNgram(ConformanceSuite):
    """Every composition that fits the ngram drafter is lossless.

    300 samples per chi-square test instead of the kit's 800, as specmix's own suites run
    them: a broken rule still fails far below the threshold at this count
    (specmix's tests/test_kit_power.py).
    """

    drafter = "ngram"
    sampling_samples = 300
