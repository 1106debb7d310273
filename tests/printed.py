"""A report's rounded numbers compared as numbers, not as strings.

A report prints 4 decimals of a value; a test recomputes that value outside the report's code. The two
differ in the last bits (another CPU's float results, another summation order), so a value lying near
a rounding boundary prints one way in the report and the other way in the test (seen: 3.358349 against
3.358354, "3.3583" against "3.3584"). Exact values compared within half a unit of the last printed
digit are right on every machine, and still catch a wrong number: any error above that half unit fails.
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"-?\d+\.\d+")  # a printed (rounded) value; integers such as n=3 are words
_FLOAT_NOISE = 1e-9  # recomputation vs report: ~1e-15 apart; far below half a unit of 4 decimals (5e-5)


class Printed:
    """What a cell should read: `template` (str.format) filled with the exact values.

    `Printed("{:.4f} [{:.4f}, {:.4f}]", m, lo, hi) == cell` holds when the cell's words are the
    template's and each printed number lies within half a unit of its last digit of the exact value."""

    def __init__(self, template: str, *values: float) -> None:
        self.values = values
        self.text = template.format(*values)
        self.words = _DECIMAL.sub("{}", self.text)
        if len(_DECIMAL.findall(self.text)) != len(values):
            raise ValueError(f"{template!r}: one decimal placeholder per value, none in the words")

    def __eq__(self, printed: object) -> bool:
        if not isinstance(printed, str):
            return NotImplemented
        numbers = _DECIMAL.findall(printed)
        if _DECIMAL.sub("{}", printed) != self.words or len(numbers) != len(self.values):
            return False
        digits = [len(n.split(".")[1]) for n in _DECIMAL.findall(self.text)]
        if [len(n.split(".")[1]) for n in numbers] != digits:
            return False  # printed to another precision than the template says
        return all(within_half_unit(p, v) for p, v in zip(numbers, self.values, strict=True))

    def __repr__(self) -> str:
        return f"Printed({self.text!r} ~ {self.values})"


def within_half_unit(printed: str, value: float) -> bool:
    """|printed - value| ≤ half a unit of the printed last digit (and float noise)."""
    decimals = len(printed.split(".")[1])
    return abs(float(printed) - value) <= 0.5 * 10.0**-decimals + _FLOAT_NOISE
