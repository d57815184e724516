"""Kubernetes resource quantities ("500m", "1.5Gi", "2e3") as integers in the scheduler's units.

The scheduler compares cpu in millicores and every other resource in whole units, each
rounded up; we keep the same units so a fit decided here is the fit the worker's scheduler
decides.

A tenant writes these strings (a Job's template, any Pod in a worker namespace), and the API
server accepts ``10e9999999``: the value is never built in full. The exponent is read with a
bound, the digits are cut at :data:`_KEEP_DIGITS` significant ones (rounding up), and every
value of :data:`HUGE` or more in the scheduler's units is :data:`HUGE`, larger than any real
node's allocatable (an int64 quantity, 9.2e18, is 9.2e21 millicores): a request that large never
fits. Like the API server, a value below one nano-unit rounds up to it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache

#: Every quantity of this much or more in the scheduler's units (millicores, bytes, units) is
#: this: beyond any node's allocatable, and small enough that sums of it stay finite floats.
HUGE = 10**30
_HUGE_NANOS = HUGE * 10**9

#: Significant digits kept of a mantissa; more are cut, rounding up (a Kubernetes quantity is
#: exact only to 1n anyway, and ``HUGE`` in nano-units has 40 digits).
_KEEP_DIGITS = 64
#: Longest exponent read as a number; a longer one (leading zeros aside) is simply huge or tiny.
_EXPONENT_DIGITS = 6
#: A value with more digits than this before the unit, in nano-units, is ``HUGE`` in any unit.
_HUGE_NANO_DIGITS = 40

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of ten
# Linear, and possessive digit runs: a long string that does not match fails without giving back
# its digits one by one.
_FORM = re.compile(r"([+-]?)([0-9]*+)(?:\.([0-9]*+))?(?:[eE]([+-]?)([0-9]++)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")

# The form nearly every quantity in a fleet has ("500m", "2", "1.5Gi"): a decimal number and a suffix,
# read without the general path's bookkeeping (and clamped like it: 15 digits of Ei pass HUGE).
_PLAIN = re.compile(r"([0-9]{1,15})(?:\.([0-9]{1,9}))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")
_PLAIN_NANOS = {**{suffix: 2**bits * 10**9 for suffix, bits in _BINARY.items()},
                **{suffix: 10**(power + 9) for suffix, power in _DECIMAL.items()}}

#: resources the scheduler compares in thousandths
MILLI_RESOURCES = frozenset({"cpu"})

#: values shown in scientific notation from this size on (in the resource's own unit)
_SCIENTIFIC = 10**15


class QuantityError(ValueError):
    """A quantity string the API server would not have accepted; the message quotes it."""


def _quote(text: str) -> str:
    """The quantity for a message, cut: the string may be as long as the object holding it."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def nanos(text: str | int | float) -> int:
    """The value of a quantity in nano-units, rounded up (away from zero), within ``±HUGE * 10**9``.

    Raises QuantityError for a string the API server would refuse."""
    if isinstance(text, bool):
        raise QuantityError(f"not a Kubernetes quantity: {text!r}")
    if isinstance(text, int):
        return _clamp(text * 10**9) if abs(text) < HUGE else (HUGE if text > 0 else -HUGE) * 10**9
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"not a Kubernetes quantity: {text!r}")
        return nanos(repr(text).replace("e+", "e"))
    if isinstance(text, str) and len(text) <= _CACHED_LENGTH:
        return _nanos_of_short(text)
    return _nanos_of_text(str(text))


#: Quantity strings up to this long are remembered once read: a fleet writes few distinct ones
#: and the room view reads every container of every pod event. Longer ones, which only a tenant
#: testing limits writes, are read each time and never kept alive by the cache.
_CACHED_LENGTH = 64


@lru_cache(maxsize=4096)
def _nanos_of_short(text: str) -> int:
    return _nanos_of_text(text)


def _nanos_of_text(text: str) -> int:
    plain = _PLAIN.fullmatch(text)
    if plain:
        whole, frac, suffix = plain.groups()
        if frac is None:
            return _clamp(int(whole) * _PLAIN_NANOS[suffix or ""])
        scale = 10 ** len(frac)
        return _clamp(-(-(int(whole) * scale + int(frac)) * _PLAIN_NANOS[suffix or ""] // scale))
    s = text.strip()
    m = _FORM.fullmatch(s)
    if not m or not (m.group(2) or m.group(3)):
        raise QuantityError(f"not a Kubernetes quantity: {_quote(s)}")
    sign, whole, frac, exp_sign, exp_digits, suffix = m.groups()
    digits = (whole + (frac or "")).lstrip("0")
    power = -len(frac or "")  # value = int(digits) * 10**power * (suffix)
    binary = 0
    if exp_digits is not None:
        exp_digits = exp_digits.lstrip("0") or "0"
        if len(exp_digits) > _EXPONENT_DIGITS:  # beyond any bound below: only the sign of the exponent matters
            exponent = -(10**_EXPONENT_DIGITS) if exp_sign == "-" else 10**_EXPONENT_DIGITS
        else:
            exponent = -int(exp_digits) if exp_sign == "-" else int(exp_digits)
        power += exponent
    elif suffix in _BINARY:
        binary = _BINARY[suffix]
    else:
        power += _DECIMAL[suffix or ""]
    value = _nanos_of(digits, power + 9, binary)
    return -value if sign == "-" else value


def _nanos_of(digits: str, power: int, binary: int) -> int:
    """``ceil(int(digits) * 10**power * 2**binary)`` without building more than ~100 digits:
    at least 1 when ``digits`` is not zero, at most ``HUGE * 10**9``."""
    stripped = digits.rstrip("0")
    power += len(digits) - len(stripped)
    digits = stripped
    if not digits:
        return 0
    kept = digits[:_KEEP_DIGITS]
    if len(digits) > len(kept):  # cut: what is left is smaller than one unit of the last kept digit
        power += len(digits) - len(kept)
        cut = digits[len(kept):].strip("0") != ""
        digits = kept
    else:
        cut = False
    binary_digits = (binary * 3 + 9) // 10  # 2**binary < 10**binary_digits
    size = len(digits) + power  # the value is below 10**(size + binary_digits) and at least 10**(size - 1)
    if size - 1 > _HUGE_NANO_DIGITS:
        return _HUGE_NANOS
    if size + binary_digits < 0:
        return 1  # below 1n: the API server rounds it up to 1n
    number = (int(digits) + cut) * 2**binary
    if power >= 0:
        return _clamp(number * 10**power)
    whole, rest = divmod(number, 10**-power)
    return _clamp(whole + (rest > 0))


def _clamp(value: int) -> int:
    return -_HUGE_NANOS if value < -_HUGE_NANOS else _HUGE_NANOS if value > _HUGE_NANOS else value


def parse(text: str | int | float) -> Fraction:
    """The value of a quantity (to 1n, rounded up; ``±HUGE`` at most)."""
    return Fraction(nanos(text), 10**9)


def amount(resource: str, text: str | int | float) -> int:
    """A quantity in the scheduler's units for ``resource`` (millicores for cpu), rounded up,
    :data:`HUGE` at most."""
    scale = 10**6 if resource in MILLI_RESOURCES else 10**9
    return max(-HUGE, min(HUGE, -(-nanos(text) // scale)))


def amounts(resources: Mapping[str, object] | None) -> dict[str, int]:
    """A ResourceList (``{"cpu": "500m", ...}``) in the scheduler's units."""
    return {name: amount(name, q if isinstance(q, int | float) and not isinstance(q, bool) else str(q))
            for name, q in (resources or {}).items()}


def show(resource: str, value: int) -> str:
    """A value in the scheduler's units, as a person reads it in an event (never raises: a huge
    one in scientific notation)."""
    if resource in MILLI_RESOURCES:
        if abs(value) >= _SCIENTIFIC * 1000:
            return _scientific(value, -3)
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if abs(value) >= _SCIENTIFIC:
        return _scientific(value, 0)
    if resource == "memory" or resource.startswith(("hugepages-", "ephemeral-storage")):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{value // size}{suffix}"
        if value >= 2**20:
            return f"{value / 2**30:.1f}Gi"
    return str(value)


def _scientific(value: int, power: int) -> str:
    """``value * 10**power`` as ``1.23e27`` (three digits, rounded down), from integers only: a
    float of an int past 1e308 would raise."""
    sign, value = ("-" if value < 0 else ""), abs(value)
    if value < 100:
        return f"{sign}{value}e{power}"
    exponent = len(str(value)) - 1 if value.bit_length() < 4000 else int(value.bit_length() * math.log10(2))
    while value >= 10 ** (exponent + 1):
        exponent += 1
    while exponent and value < 10**exponent:
        exponent -= 1
    lead = value // 10 ** max(0, exponent - 2)
    mantissa = f"{lead // 100}.{lead % 100:02d}".rstrip("0").rstrip(".")
    return f"{sign}{mantissa}e{exponent + power}"
