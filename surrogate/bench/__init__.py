"""Benchmarks: metrics, analytic MuJoCo baselines (nominal, randomized, identified),
suites, the transfer ledger and its report, and the studies (``gap``: the rig's analytic gap,
``soak``: long hybrid rollouts, ``speed``: steps per second)."""
