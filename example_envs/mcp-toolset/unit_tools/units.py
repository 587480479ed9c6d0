"""Units and conversions, exact: every factor is a ``Fraction`` of the quantity's base unit.

>>> float(convert(1, "mi", "km"))
1.609344
>>> float(convert(212, "degF", "degC"))
100.0
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["QUANTITIES", "UnitError", "convert", "quantity_of"]

#: quantity -> unit symbol -> (name, size in the base unit). Temperatures are affine: see _TEMPERATURE.
QUANTITIES: dict[str, dict[str, tuple[str, Fraction]]] = {
    "length": {
        "m": ("metre", Fraction(1)),
        "km": ("kilometre", Fraction(1000)),
        "cm": ("centimetre", Fraction(1, 100)),
        "in": ("inch", Fraction(254, 10000)),
        "ft": ("foot", Fraction(3048, 10000)),
        "yd": ("yard", Fraction(9144, 10000)),
        "mi": ("mile", Fraction(1609344, 1000)),
        "nmi": ("nautical mile", Fraction(1852)),
    },
    "mass": {
        "kg": ("kilogram", Fraction(1)),
        "g": ("gram", Fraction(1, 1000)),
        "lb": ("pound", Fraction(45359237, 100000000)),
        "oz": ("ounce", Fraction(45359237, 1600000000)),
        "st": ("stone", Fraction(45359237 * 14, 100000000)),
    },
    "volume": {
        "L": ("litre", Fraction(1)),
        "mL": ("millilitre", Fraction(1, 1000)),
        "gal": ("US gallon", Fraction(3785411784, 1000000000)),
        "qt": ("US quart", Fraction(3785411784, 4000000000)),
        "cup": ("US cup", Fraction(3785411784, 16000000000)),
        "tbsp": ("US tablespoon", Fraction(3785411784, 256000000000)),
    },
    "time": {
        "s": ("second", Fraction(1)),
        "min": ("minute", Fraction(60)),
        "h": ("hour", Fraction(3600)),
        "day": ("day", Fraction(86400)),
        "week": ("week", Fraction(604800)),
    },
    "temperature": {
        "K": ("kelvin", Fraction(1)),
        "degC": ("degree Celsius", Fraction(1)),
        "degF": ("degree Fahrenheit", Fraction(5, 9)),
    },
}

#: Temperature: kelvin = (value + offset) * size.
_TEMPERATURE = {"K": Fraction(0), "degC": Fraction(27315, 100), "degF": Fraction(45967, 100)}


class UnitError(ValueError):
    """A unit that does not exist, or two units of different quantities."""


def quantity_of(unit: str) -> str:
    for quantity, units in QUANTITIES.items():
        if unit in units:
            return quantity
    known = ", ".join(u for units in QUANTITIES.values() for u in units)
    raise UnitError(f"unknown unit {unit!r}; the units are: {known}")


def convert(value: Fraction | float | int, from_unit: str, to_unit: str) -> Fraction:
    """``value`` in ``from_unit``, expressed in ``to_unit``; raises :class:`UnitError`."""
    source, target = quantity_of(from_unit), quantity_of(to_unit)
    if source != target:
        raise UnitError(f"cannot convert {from_unit} ({source}) to {to_unit} ({target})")
    value = Fraction(value)
    units = QUANTITIES[source]
    if source == "temperature":
        kelvin = (value + _TEMPERATURE[from_unit]) * units[from_unit][1]
        return kelvin / units[to_unit][1] - _TEMPERATURE[to_unit]
    return value * units[from_unit][1] / units[to_unit][1]
