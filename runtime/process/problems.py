"""A pydantic validation error as one line for a person: the first problem, where it is, and how many more.

pydantic's own text is several lines per problem (with the input and a URL), which reads as a crash in a terminal
or a JSON error; every place that shows a validation error to a user goes through `one_line_problems`.
"""

from __future__ import annotations

import re

from pydantic import ValidationError


def one_line_problems(error: ValidationError) -> str:
    """`loc: message` of the first problem, and `(and N more)` when there are others; never more than one line."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = re.sub(r"^Value error, ", "", first["msg"])
    message = " ".join(message.split())  # a validator's own message may hold newlines
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{where}: {message}{more}"
