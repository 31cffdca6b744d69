"""The timing every benchmark here shares: the median wall time of calls to a function."""

import statistics
import time


def median_s(fn, calls, warmup=0):
    """Median seconds of `calls` calls to fn(), after `warmup` calls that are not timed."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
