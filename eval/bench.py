"""Benchmark entry point: ``python eval/bench.py <suite> --out DIR [--checkpoint CKPT] [--test-data DATASET]``.

The same as ``surrogate bench``; suites are defined under ``configs/eval/``.
"""

import sys

from surrogate.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
