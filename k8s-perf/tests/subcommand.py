"""k8s-perf/tests/subcommand.py - the one way the tests' small helper modules
(check_apiserver.py, check_results.py, secure_standins.py) turn
`NAME ARG...` into a call of their function NAME with ARG... as strings.

Must not: know any helper's commands.
"""

from __future__ import annotations

import sys
from typing import Callable


def run(doc: str, commands: dict[str, Callable[..., int]], argv: list[str]) -> int:
    """Call commands[argv[0]](*argv[1:]); the module's doc and exit 2 when
    the name is unknown or the arguments do not fit."""
    fn = commands.get(argv[0]) if argv else None
    if fn is None:
        print(doc, file=sys.stderr)
        return 2
    try:
        return fn(*argv[1:])
    except TypeError as e:
        if e.__traceback__ is not None and e.__traceback__.tb_next is None:  # the call itself: wrong arity
            print(f"{argv[0]}: {e}\n\n{doc}", file=sys.stderr)
            return 2
        raise
