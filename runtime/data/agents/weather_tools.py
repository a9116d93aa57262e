"""A custom tool, written beside `weatherbot.yaml` by `pagemind init`; the YAML lists it as
`weather_tools:forecast`, and pagemind imports this module from the YAML's own folder.

A tool is a typed function with a docstring: the model sees its name, the docstring's first paragraph as the
description and the `Args:` as the parameters' descriptions. The forecast here is made up (the same city and
day always give the same weather) so that the example runs with no network: replace the body of `forecast`
with a call to a real weather service.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from pagemind.tools import ToolContext, ToolError, tool

SKIES = ("sunny", "partly cloudy", "cloudy", "light rain", "showers", "windy", "snow")


@tool(read_only=True)
def forecast(city: str, context: ToolContext, days: int = 1) -> str:
    """Get the weather forecast for a city, one line per day starting today.

    Args:
        city: The city, e.g. "Oslo" or "Lisbon, Portugal".
        days: How many days to forecast, 1 to 7.
    """
    if not 1 <= days <= 7:
        raise ToolError(f"days must be between 1 and 7, not {days}")
    if not city.strip():
        raise ToolError("name a city")
    today = context.now().date()  # the agent's clock: fixed in tests and replays
    lines = []
    for offset in range(days):
        day = today + timedelta(days=offset)
        seed = hashlib.sha256(f"{city.strip().lower()}|{day.isoformat()}".encode()).digest()
        low = seed[1] % 25 - 5
        lines.append(f"{day:%a %d %b}: {SKIES[seed[0] % len(SKIES)]}, {low} to {low + 3 + seed[2] % 8} °C")
    return f"Forecast for {city.strip()} (made up by the example tool):\n" + "\n".join(lines)
