"""`model.prices`: what the endpoint charges, so a turn's cost can be estimated from the tokens its steps used."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PER = 1_000_000  # prices are quoted per million tokens, as providers publish them


class ModelPrices(BaseModel):
    """The endpoint's prices in US dollars per million tokens. Optional: without it no cost is shown."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="dollars per million prompt tokens not read from the prompt cache")
    cached_input: float | None = Field(
        None, ge=0, description="dollars per million prompt tokens read from the prompt cache (default: `input`)"
    )
    output: float = Field(ge=0, description="dollars per million completion tokens")

    def cost(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> float:
        """The estimated cost in dollars of a request (or a sum of requests) with these token counts; cached
        tokens are part of `prompt_tokens`, as providers report them."""
        cached = min(cached_tokens, prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return ((prompt_tokens - cached) * self.input + cached * cached_price + completion_tokens * self.output) / PER
