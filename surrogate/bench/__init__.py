"""Benchmarks: metrics, analytic MuJoCo baselines (nominal, randomized, identified),
suites, the transfer ledger and its report."""
