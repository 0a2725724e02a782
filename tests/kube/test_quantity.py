"""Resource quantities, Go durations and the Resources type (kube.quantity)."""

from __future__ import annotations

import pickle
from datetime import timedelta
from fractions import Fraction

import pytest

from kube import quantity
from kube.quantity import Resources

Ki, Mi, Gi = 2**10, 2**20, 2**30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("1", 1, id="plain"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("100m", Fraction(1, 10), id="milli"),
        pytest.param("0.5", Fraction(1, 2), id="fraction"),
        pytest.param(".5", Fraction(1, 2), id="no-integer-part"),
        pytest.param("5.", 5, id="no-fraction-digits"),
        pytest.param("+1", 1, id="plus-sign"),
        pytest.param("-1.5", Fraction(-3, 2), id="minus-sign"),
        pytest.param("1.5Gi", 3 * Gi // 2, id="fractional-binary"),
        pytest.param("1Ki", Ki, id="Ki"),
        pytest.param("1Mi", Mi, id="Mi"),
        pytest.param("1Ti", 2**40, id="Ti"),
        pytest.param("1Pi", 2**50, id="Pi"),
        pytest.param("1Ei", 2**60, id="Ei"),
        pytest.param("3n", Fraction(3, 10**9), id="nano"),
        pytest.param("3u", Fraction(3, 10**6), id="micro"),
        pytest.param("2k", 2000, id="kilo"),
        pytest.param("2M", 2 * 10**6, id="mega"),
        pytest.param("2G", 2 * 10**9, id="giga"),
        pytest.param("2T", 2 * 10**12, id="tera"),
        pytest.param("2P", 2 * 10**15, id="peta"),
        pytest.param("2E", 2 * 10**18, id="exa-suffix-not-exponent"),
        pytest.param("1e3", 1000, id="exponent"),
        pytest.param("1E-3", Fraction(1, 1000), id="negative-exponent"),
        pytest.param("12e6", 12 * 10**6, id="exponent-12e6"),
        pytest.param("1e+3", 1000, id="signed-exponent"),
        pytest.param("0.9n", Fraction(1, 10**9), id="below-nano-rounds-up"),
        pytest.param("-0.9n", Fraction(-1, 10**9), id="below-nano-rounds-away"),
        pytest.param("8Ei", 2**63 - 1, id="binary-capped-at-int64"),
    ],
)
def test_parse_quantity_values(text: str, value: Fraction | int) -> None:
    """Every suffix, exponent and sign parses to the exact apimachinery value."""
    assert quantity.parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param("5Xi", id="unknown-binary"),
        pytest.param("abc", id="letters"),
        pytest.param("1e", id="bare-e"),
        pytest.param("1E+", id="exponent-without-digits"),
        pytest.param("1e1.5", id="fractional-exponent"),
        pytest.param("--1", id="double-sign"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param(".", id="only-dot"),
        pytest.param("+", id="only-sign"),
        pytest.param("m", id="only-suffix"),
        pytest.param("1K", id="uppercase-K"),
        pytest.param("1ki", id="lowercase-ki"),
        pytest.param("1e99999", id="absurd-exponent"),
    ],
)
def test_parse_quantity_rejects_garbage_naming_input(text: str) -> None:
    """Malformed quantities raise ValueError quoting the input."""
    with pytest.raises(ValueError, match=repr(text).replace("+", r"\+").replace(".", r"\.")):
        quantity.parse_quantity(text)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="bool"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(None, id="none"),
    ],
)
def test_parse_quantity_rejects_non_quantities(value: object) -> None:
    """Booleans, non-finite floats and other types are not quantities."""
    with pytest.raises(ValueError):
        quantity.parse_quantity(value)  # type: ignore[arg-type]


def test_parse_quantity_reads_json_numbers_exactly() -> None:
    """JSON numbers keep their decimal value (0.1 is 1/10, not a binary float)."""
    assert quantity.parse_quantity(2) == 2
    assert quantity.parse_quantity(0.1) == Fraction(1, 10)
    assert quantity.parse_quantity(1e-3) == Fraction(1, 1000)


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        pytest.param("1500m", 1500, id="millis"),
        pytest.param("2", 2000, id="cores"),
        pytest.param("0.0001", 1, id="rounds-up"),
        pytest.param("1.0001", 1001, id="rounds-up-above-one"),
        pytest.param("-0.0001", -1, id="rounds-away-from-zero"),
        pytest.param("250u", 1, id="micro-rounds-up"),
        pytest.param(2, 2000, id="json-int"),
        pytest.param(0.1, 100, id="json-float"),
    ],
)
def test_cpu_millis_rounds_like_milli_value(value: str | int | float, millis: int) -> None:
    """CPU converts to millicores rounding away from zero, like MilliValue()."""
    assert quantity.cpu_millis(value) == millis


@pytest.mark.parametrize(
    ("value", "n"),
    [
        pytest.param("128Mi", 128 * Mi, id="Mi"),
        pytest.param("1.5Gi", 3 * Gi // 2, id="fractional-Gi"),
        pytest.param("1.1", 2, id="rounds-up"),
        pytest.param("1e3", 1000, id="exponent"),
        pytest.param("123456789", 123456789, id="plain"),
        pytest.param(1024, 1024, id="json-int"),
    ],
)
def test_memory_bytes_rounds_up(value: str | int, n: int) -> None:
    """Byte quantities convert to whole bytes rounding up, like Value()."""
    assert quantity.memory_bytes(value) == n


@pytest.mark.parametrize(
    ("millis", "text"),
    [
        pytest.param(1500, "1500m", id="fractional-core"),
        pytest.param(2000, "2", id="whole-cores"),
        pytest.param(100, "100m", id="small"),
        pytest.param(1, "1m", id="one-milli"),
        pytest.param(0, "0", id="zero"),
        pytest.param(2_000_000, "2k", id="thousands-of-cores"),
        pytest.param(-500, "-500m", id="negative"),
    ],
)
def test_format_cpu_is_canonical(millis: int, text: str) -> None:
    """CPU prints in Kubernetes' canonical DecimalSI form."""
    assert quantity.format_cpu(millis) == text


def test_format_decimal_si_falls_back_to_exponent_past_exa() -> None:
    """Beyond the E suffix the canonical form uses e-notation, as Kubernetes does."""
    assert quantity.format_decimal_si(10**21) == "1e21"
    assert quantity.format_decimal_si(10**22) == "10e21"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        pytest.param(123456789, "123456789", id="not-a-multiple"),
        pytest.param(Gi, "1Gi", id="Gi"),
        pytest.param(1536 * Mi, "1536Mi", id="Mi"),
        pytest.param(1000, "1000", id="below-1024"),
        pytest.param(0, "0", id="zero"),
        pytest.param(2**60 * 3, "3Ei", id="Ei"),
    ],
)
def test_format_binary_si_is_canonical(n: int, text: str) -> None:
    """Byte counts print in canonical BinarySI form."""
    assert quantity.format_binary_si(n) == text


def test_formatters_round_trip_through_parsing() -> None:
    """What we print parses back to the same integer."""
    for millis in (0, 1, 999, 1000, 1001, 1500, 64_000, 123_456_789):
        assert quantity.cpu_millis(quantity.format_cpu(millis)) == millis
    for n in (0, 1, 1023, Ki, 5 * Mi + 1, 16 * Gi, 123456789):
        assert quantity.memory_bytes(quantity.format_binary_si(n)) == n
        assert quantity.memory_bytes(quantity.format_bytes(n)) == n


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(300, "5m0s", id="five-minutes"),
        pytest.param(90, "1m30s", id="ninety-seconds"),
        pytest.param(3600, "1h0m0s", id="hour"),
        pytest.param(5400.5, "1h30m0.5s", id="fractional"),
        pytest.param(1.5, "1.5s", id="one-and-a-half"),
        pytest.param(0.5, "500ms", id="milliseconds"),
        pytest.param(timedelta(microseconds=1), "1µs", id="microsecond"),
        pytest.param(timedelta(microseconds=1500), "1.5ms", id="fractional-ms"),
        pytest.param(-90, "-1m30s", id="negative"),
    ],
)
def test_format_go_duration_matches_go(value: int | float | timedelta, text: str) -> None:
    """Durations print like Go's time.Duration.String()."""
    assert quantity.format_go_duration(value) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1m", 60, id="minute"),
        pytest.param("1h30m", 5400, id="hours-and-minutes"),
        pytest.param("90s", 90, id="seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1.5h", 5400, id="fractional-hours"),
        pytest.param(".5s", 0.5, id="leading-dot"),
        pytest.param("-1m", -60, id="negative"),
        pytest.param("+5s", 5, id="plus"),
        pytest.param("0", 0, id="bare-zero"),
        pytest.param("5m0s", 300, id="canonical"),
        pytest.param("1us", 0.000001, id="us"),
        pytest.param("1µs", 0.000001, id="micro-sign"),
        pytest.param("1000ns", 0.000001, id="nanoseconds"),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    """Go duration strings parse to timedeltas."""
    assert quantity.parse_go_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "1", "1x", "h", ".s", "--1s", "1s ", "1h 30m", "-"])
def test_parse_go_duration_rejects_garbage(text: str) -> None:
    """Malformed durations raise ValueError quoting the input."""
    with pytest.raises(ValueError, match="invalid duration"):
        quantity.parse_go_duration(text)


class TestResources:
    """The immutable resource mapping."""

    def test_from_api_converts_each_resource_to_its_unit(self) -> None:
        """CPU becomes millicores, everything else integer base units."""
        res = Resources.from_api(
            {"cpu": "1.5", "memory": "1Gi", "nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"}
        )
        assert res == {"cpu": 1500, "memory": Gi, "nvidia.com/gpu": 2, "hugepages-2Mi": 4 * Mi}
        assert (res.cpu, res.memory) == (1500, Gi)

    def test_to_api_prints_canonical_cpu_and_plain_bytes(self) -> None:
        """The API form is what NodeMetric carries on the wire."""
        assert Resources({"cpu": 1500, "memory": 123456789}).to_api() == {
            "cpu": "1500m",
            "memory": "123456789",
        }

    def test_arithmetic_treats_missing_names_as_zero(self) -> None:
        """+, -, max_with and clamp_min work name by name."""
        a = Resources({"cpu": 1000, "memory": 100})
        b = Resources({"cpu": 300, "pods": 1})
        assert a + b == {"cpu": 1300, "memory": 100, "pods": 1}
        assert a - b == {"cpu": 700, "memory": 100, "pods": -1}
        assert a.max_with(b) == {"cpu": 1000, "memory": 100, "pods": 1}
        assert (b - a).clamp_min(0) == {"cpu": 0, "memory": 0, "pods": 1}

    def test_is_immutable_hashable_and_picklable(self) -> None:
        """Resources cannot be changed, hash by value and survive pickling."""
        res = Resources({"cpu": 1})
        with pytest.raises(AttributeError):
            res._items = ()
        assert hash(res) == hash(Resources({"cpu": 1}))
        assert pickle.loads(pickle.dumps(res)) == res
        assert res != Resources({"cpu": 2}) and res != {"cpu": 1, "memory": 0}

    def test_equal_values_from_the_api_share_one_instance(self) -> None:
        """A pod cache repeating one shape holds one Resources object."""
        assert Resources.from_api({"cpu": "100m"}) is Resources.from_api({"cpu": "0.1"})
        assert Resources.from_api({}) is Resources.from_api(None)

    def test_invalid_quantity_names_the_resource_list(self) -> None:
        """A bad amount raises ValueError showing the list and the bad value."""
        with pytest.raises(ValueError, match="banana"):
            Resources.from_api({"cpu": "banana"})

    def test_rejects_non_integer_amounts(self) -> None:
        """Amounts are exact integers; floats are a bug upstream."""
        with pytest.raises(TypeError, match="cpu"):
            Resources({"cpu": 1.5})  # type: ignore[arg-type]

    def test_rejects_booleans_but_takes_int_subclasses(self) -> None:
        """True is no amount; an int subclass is an int (the fast type check keeps both rules)."""

        class Millis(int):
            pass

        with pytest.raises(TypeError, match="memory"):
            Resources({"cpu": 1, "memory": True})
        assert Resources({"cpu": Millis(5)}) == {"cpu": 5}

    def test_reads_like_a_dict_in_name_order(self) -> None:
        """Lookups, iteration and the three views answer as the sorted dict would."""
        res = Resources({"pods": 3, "cpu": 1500, "memory": 2 * Gi})
        same = {"cpu": 1500, "memory": 2 * Gi, "pods": 3}
        assert list(res) == list(res.keys()) == ["cpu", "memory", "pods"]
        assert list(res.items()) == list(same.items())
        assert list(res.values()) == [1500, 2 * Gi, 3]
        assert (len(res), res["memory"], res.cpu, res.memory) == (3, 2 * Gi, 1500, 2 * Gi)
        assert (res.get("cpu"), res.get("gpu"), res.get("gpu", 0)) == (1500, None, 0)
        assert ("pods" in res, "gpu" in res) == (True, False)
        with pytest.raises(KeyError, match="gpu"):
            res["gpu"]
        # the views are set-like, as Mapping's are
        assert res.keys() & {"cpu", "gpu"} == {"cpu"}
        assert res.items() == same.items()
        assert Resources().get("cpu", 7) == 7 and list(Resources().items()) == []
        # an unhashable name is absent, as with any Mapping built on a scan
        assert ([] in res, res.get([], 0)) == (False, 0)  # type: ignore[call-overload, comparison-overlap]
        with pytest.raises(KeyError):
            res[[]]  # type: ignore[index]

    def test_views_cannot_change_it(self) -> None:
        """The views read the private dict; nothing reached through them writes to it."""
        res = Resources({"cpu": 1})
        view = res.items()
        with pytest.raises(TypeError):
            view.mapping["cpu"] = 2  # type: ignore[attr-defined]
        assert res == {"cpu": 1}

    def test_copy_of_resources_is_equal(self) -> None:
        """Resources(other Resources) is equal, hashes alike and stays immutable."""
        res = Resources({"memory": 1, "cpu": 2})
        copy = Resources(res)
        assert copy == res and hash(copy) == hash(res)
        assert hash(res) == hash((("cpu", 2), ("memory", 1)))  # the sorted items, as before
        assert copy - {"cpu": 2} == {"cpu": 0, "memory": 1} and res == {"cpu": 2, "memory": 1}
        assert repr(copy) == "Resources({'cpu': 2, 'memory': 1})"


COMMON_FORMS = [
    *("0", "2", "007", "250m", "1500m", "0m", "128Mi", "1Gi", "3Ki", "8Ei", "9999999Ei"),
    # metrics-server's nanocores: exact, just above and just below a millicore
    *("250316000n", "250000001n", "999999n", "1000000n", "0n", "n", "1.5n"),
]
UNUSUAL_FORMS = [
    "1.5",
    "2k",
    "500m",
    "1e3",
    "+2",
    "-250m",
    "m",
    "Mi",
    "²",
    "1²m",
    "\uff11",
    "0.5Gi",
]


@pytest.mark.parametrize("text", COMMON_FORMS + UNUSUAL_FORMS)
def test_common_forms_read_as_exact_arithmetic_does(text: str) -> None:
    """The shortcuts for digits, "<digits>m", "<digits>n" and binary suffixes agree with the
    general parser."""
    for read, scale in ((quantity.cpu_millis, 1000), (quantity.quantity_value, 1)):
        try:
            expected = quantity._round_away(quantity.parse_quantity(text) * scale)
        except ValueError:
            with pytest.raises(ValueError):
                read(text)
        else:
            assert read(text) == expected
