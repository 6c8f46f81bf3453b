from specmix.testing import ConformanceSuite


class TestNgram(ConformanceSuite):
    """Every composition that fits the ngram drafter is lossless."""

    drafter = "ngram"
