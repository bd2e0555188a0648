"""An --env-side option's value: a side's label and the environment it adds.

`bench/run.py compare --exact` runs this checkout's code again with it (bench/compare.py);
`bench/run.py scale-out` the app's runs, with it added to the driver's environment
(bench/scale/scale_out.py).
"""

from __future__ import annotations

import argparse
import re

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_side(spec: str) -> tuple[str, dict[str, str]]:
    """An --env-side's label and environment, from `LABEL:VAR=VALUE[,VAR=VALUE...]`.

    The label ends at the first colon; a value may hold `=` but not a comma.
    """
    label, colon, assignments = spec.partition(":")
    if not colon or not label.strip():
        raise argparse.ArgumentTypeError(f"{spec!r}: expected LABEL:VAR=VALUE[,VAR=VALUE...]")
    env: dict[str, str] = {}
    for assignment in assignments.split(","):
        name, equals, value = assignment.partition("=")
        if not equals or not ENV_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(
                f"{spec!r}: {assignment!r} is not VAR=VALUE with VAR a variable's name"
            )
        if name in env:
            raise argparse.ArgumentTypeError(f"{spec!r}: {name} is set twice")
        env[name] = value
    return label.strip(), env
