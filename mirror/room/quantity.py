"""Kubernetes resource quantities ("500m", "1.5Gi", "2e3") as exact integers.

The scheduler compares cpu in millicores and every other resource in whole units, each
rounded up; we keep the same units so a fit decided here is the fit the worker's scheduler
decides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_FORM = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")

#: resources the scheduler compares in thousandths
MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    """A quantity string the API server would not have accepted; the message quotes it."""


def parse(text: str | int | float) -> Fraction:
    """The exact value of a quantity."""
    if isinstance(text, int | float):
        return Fraction(text)
    m = _FORM.match(str(text).strip())
    if not m:
        raise QuantityError(f"not a Kubernetes quantity: {text!r}")
    sign, number, exponent, suffix = m.groups()
    value = Fraction(number)
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    return -value if sign == "-" else value


def amount(resource: str, text: str | int | float) -> int:
    """A quantity in the scheduler's units for ``resource`` (millicores for cpu), rounded up."""
    value = parse(text)
    return math.ceil(value * 1000) if resource in MILLI_RESOURCES else math.ceil(value)


def amounts(resources: Mapping[str, object] | None) -> dict[str, int]:
    """A ResourceList (``{"cpu": "500m", ...}``) in the scheduler's units."""
    return {name: amount(name, str(q)) for name, q in (resources or {}).items()}


def show(resource: str, value: int) -> str:
    """A value in the scheduler's units, as a person reads it in an event."""
    if resource in MILLI_RESOURCES:
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if resource == "memory" or resource.startswith(("hugepages-", "ephemeral-storage")):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{value // size}{suffix}"
        if value >= 2**20:
            return f"{value / 2**30:.1f}Gi"
    return str(value)
