"""`--expect-gpus` / `--expect-mig` / `--expect-model`: the same flags and meaning for `gpuws bench`
and `gpuws health`."""

from __future__ import annotations

import argparse
from typing import Any

from gpuws.cli.output import whole_number


def add_expect_flags(parser: argparse.ArgumentParser) -> None:
    """Add the three expectation flags to `parser`."""
    parser.add_argument("--expect-gpus", type=whole_number, default=None, metavar="N", help="expected GPU count")
    parser.add_argument("--expect-mig", choices=["enabled", "disabled"], default=None,
                        help="expected MIG mode of every GPU")
    parser.add_argument("--expect-model", default=None, metavar="MODEL",
                        help='expected catalog model, e.g. "H100 SXM"')


def expected_from(args: argparse.Namespace) -> dict[str, Any] | None:
    """The flags as the expectation dict both commands pass on (None when none was given)."""
    expected: dict[str, Any] = {}
    if args.expect_gpus is not None:
        expected["gpu_count"] = args.expect_gpus
    if args.expect_mig is not None:
        expected["mig_mode"] = args.expect_mig.capitalize()
    if args.expect_model:
        expected["model"] = args.expect_model
    return expected or None
