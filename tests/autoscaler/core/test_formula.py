"""The scalingModifiers formula language: real ScaledObject formulas, expr-lang's precedence and
associativity, Go's number semantics, nil inputs, and every refusal naming its token and position."""

from __future__ import annotations

import math

import pytest

from autoscaler.core.formula import (
    MAX_DEPTH,
    MAX_LENGTH,
    FormulaError,
    FormulaInputMissing,
    evaluate,
    go_pow,
    parse_formula,
)


def value(text: str, **values: float | None) -> float:
    return evaluate(parse_formula(text), values)


def refusal(text: str, known: set[str] | None = None) -> FormulaError:
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, known)
    return caught.value


# -- formulas from real ScaledObjects


def test_average_of_two_triggers() -> None:
    formula = parse_formula("(metric1 + metric2) / 2")
    assert formula.names == frozenset({"metric1", "metric2"})
    assert formula.text == "(metric1 + metric2) / 2"
    assert evaluate(formula, {"metric1": 3.0, "metric2": 4.0}) == 3.5


def test_max_of_a_ratio_and_a_scaled_queue() -> None:
    assert value("max(p2d_ratio, qlen/1000)", p2d_ratio=0.5, qlen=2000.0) == 2.0
    assert value("max(p2d_ratio, qlen/1000)", p2d_ratio=2.5, qlen=2000.0) == 2.5


def test_weighted_sum() -> None:
    assert value("running + (waiting * 10)", running=3.0, waiting=2.0) == 23.0


def test_coalescing_chain_falls_through_to_the_constant() -> None:
    text = "primary ?? secondary ?? 8"
    assert value(text, primary=5.0, secondary=None) == 5.0
    assert value(text, primary=None, secondary=7.0) == 7.0
    assert value(text, primary=None, secondary=None) == 8.0
    assert value(text) == 8.0  # an input absent from the map is nil too, as in KEDA's data map


def test_ternary_gate() -> None:
    assert value("queue > 100 ? queue : 0", queue=150.0) == 150.0
    assert value("queue > 100 ? queue : 0", queue=100.0) == 0.0


# -- precedence and associativity (expr parser/operator/operator.go)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2-3-4", -5.0),  # left-associative
        ("2 - (3 - 4)", 3.0),
        ("2**3**2", 512.0),  # right-associative
        ("(2**3)**2", 64.0),
        ("2^3^2", 512.0),
        ("-2**2", -4.0),  # unary minus (90) binds looser than ** (100)
        ("(-2)**2", 4.0),
        ("2 + 3 * 4", 14.0),
        ("24 / 4 / 2", 3.0),
        ("10 / 4", 2.5),  # / always divides as floats
        ("7 % 3", 1.0),
        ("-7 % 3", -1.0),  # Go truncates toward zero
        ("7 % -3", 1.0),
        ("- -3", 3.0),
        ("--3", 3.0),
        ("+3", 3.0),
        ("1 + 2 > 2 ? 10 : 20", 10.0),
        ("1 < 2 < 3 ? 1 : 0", 1.0),  # chained: 1 < 2 && 2 < 3
        ("3 > 2 > 1 ? 1 : 0", 1.0),
        ("1 < 3 < 2 ? 1 : 0", 0.0),
        ("1 < 2 == (2 < 3) ? 1 : 0", 1.0),
        ("1 > 2 || 2 > 1 && 3 > 2 ? 1 : 0", 1.0),  # && (15) binds tighter than || (10)
        ("1 > 2 or 2 > 1 and 3 > 2 ? 1 : 0", 1.0),
        ("(1 > 2 || 2 > 1) && 1 > 2 ? 1 : 0", 0.0),
        ("not (1 > 2) ? 1 : 0", 1.0),
        ("!(1 > 2) ? 1 : 0", 1.0),
        ("1 > 2 ? 1 : 2 > 1 ? 2 : 3", 2.0),  # a ternary's else branch is a full expression
        ("1 > 2 ? 1 : 3 > 4 ? 2 : 3", 3.0),
        ("1_000 + 1.5e3 + .5 + 2. + 2E-1", 2502.7),
    ],
)
def test_precedence(text: str, expected: float) -> None:
    assert value(text) == pytest.approx(expected, rel=0, abs=1e-12)


def test_coalescing_binds_tightest() -> None:
    # ?? (500) is taken before + when it follows it: c + (a ?? b).
    assert value("c + a ?? b", c=1.0, a=None, b=2.0) == 3.0
    assert value("c * a ?? b + d", c=2.0, a=None, b=3.0, d=1.0) == 7.0  # (c * (a ?? b)) + d
    assert value("-a ?? b", a=None, b=2.0) == -2.0  # -(a ?? b)
    assert value("(a ?? b) + c", a=None, b=2.0, c=1.0) == 3.0


@pytest.mark.parametrize(("text", "token", "position"), [("a ?? b + c", "+", 7), ("a ?? b * c", "*", 7)])
def test_coalescing_then_another_operator_is_refused_as_in_expr(text: str, token: str, position: int) -> None:
    error = refusal(text)
    assert (error.token, error.position) == (token, position)
    assert "cannot be mixed" in str(error)


# -- numbers as Go computes them


def test_int_arithmetic_wraps_at_64_bits() -> None:
    assert value("9223372036854775807 + 1") == float(-(2**63))
    assert value("-9223372036854775807 - 2") == float(2**63 - 1)
    assert value("abs(-9223372036854775807 - 1)") == float(-(2**63))


def test_int_meets_float_as_float() -> None:
    # 2**53 + 1 is not a float64; Go converts it before comparing, so it equals 2**53 as a float.
    assert value("9007199254740993 == 9007199254740992.0 ? 1 : 0") == 1.0
    assert value("9007199254740993 == 9007199254740992 ? 1 : 0") == 0.0
    assert value("max(1, 2.5)") == 2.5


def test_min_max_keep_the_first_of_equals_and_skip_a_later_nan() -> None:
    assert value("max(1, a)", a=math.nan) == 1.0  # NaN < x is false, so a later NaN never wins
    with pytest.raises(ValueError, match="nan"):
        value("max(a, 1)", a=math.nan)
    assert value("min(3, 1, 2)") == 1.0
    assert value("max(3)") == 3.0


def test_rounding_functions() -> None:
    assert value("round(2.5)") == 3.0
    assert value("round(-2.5)") == -3.0  # half away from zero, as math.Round
    assert value("round(0.49999999999999994)") == 0.0
    assert value("ceil(1.2) + floor(-1.2)") == 0.0
    assert math.copysign(1.0, value("ceil(-0.5)")) == -1.0  # keeps the sign of zero
    assert value("abs(-3) + abs(a)", a=-1.5) == 4.5
    assert value("ceil(3)") == 3.0


def test_non_finite_results_are_refused() -> None:
    for text in ["1 / 0", "0 / 0", "a * 2", "10 ** 400", "(-8) ** (1 / 3) + 1"]:
        with pytest.raises(ValueError, match="not a finite number"):
            value(text, a=math.inf)
    assert value("0 ** -1 > 0 ? 1 : 0") == 1.0  # Go's Pow(0, -1) is +Inf, not an error


INF, NAN = math.inf, math.nan


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [  # the special cases in the doc comment of Go's math.Pow, in its order
        (NAN, 0.0, 1.0),
        (1.0, NAN, 1.0),
        (5.0, 1.0, 5.0),
        (NAN, 2.0, NAN),
        (2.0, NAN, NAN),
        (0.0, -3.0, INF),
        (-0.0, -3.0, -INF),
        (-0.0, -2.0, INF),
        (-0.0, -INF, INF),
        (0.0, INF, 0.0),
        (-0.0, 3.0, -0.0),
        (-0.0, 2.0, 0.0),
        (-1.0, INF, 1.0),
        (-1.0, -INF, 1.0),
        (2.0, INF, INF),
        (0.5, INF, 0.0),
        (2.0, -INF, 0.0),
        (0.5, -INF, INF),
        (INF, 2.0, INF),
        (INF, -2.0, 0.0),
        (-INF, 3.0, -INF),
        (-INF, -3.0, -0.0),
        (-8.0, 1 / 3, NAN),
        (4.0, 0.5, 2.0),
        (4.0, -0.5, 0.5),
        (2.0, 10.0, 1024.0),
        (2.0, -2.0, 0.25),
        (-2.0, 3.0, -8.0),
        (10.0, 400.0, INF),
        (10.0, -400.0, 0.0),
        (2.0, 1e19, INF),  # a huge even exponent
        (-1.0, 1e19, 1.0),
    ],
)
def test_pow_is_gos(x: float, y: float, expected: float) -> None:
    got = go_pow(x, y)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


def test_integer_modulo_by_zero_is_an_error() -> None:
    with pytest.raises(ValueError, match="divide by zero"):
        value("1 % 0")


def test_boolean_result_through_a_ternary_is_refused_at_evaluation() -> None:
    formula = parse_formula("a > 1 ? a > 2 : 0")  # branches of two types: unknown until it runs
    assert evaluate(formula, {"a": 0.0}) == 0.0
    with pytest.raises(ValueError, match="boolean"):
        evaluate(formula, {"a": 3.0})


# -- nil inputs


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("a + 1", "a"),
        ("b + a", "b"),
        ("max(1, a)", "a"),
        ("-a", "a"),
        ("a > 1 ? 1 : 0", "a"),
        ("a == 1 ? 1 : 0", "a"),  # stricter than expr, where nil == 1 is false
        ("a ?? b", "b"),  # the result itself is nil: KEDA takes its fallback
        ("a", "a"),
    ],
)
def test_a_nil_input_used_raises_naming_it(text: str, missing: str) -> None:
    with pytest.raises(FormulaInputMissing) as caught:
        value(text, a=None, b=None)
    assert caught.value.name == missing
    assert repr(missing) in str(caught.value)


def test_lazy_operators_never_read_a_nil_they_skip() -> None:
    assert value("a > 0 || b > 0 ? 1 : 0", a=1.0, b=None) == 1.0
    assert value("a > 0 && b > 0 ? 1 : 0", a=-1.0, b=None) == 0.0
    assert value("a > 0 ? a : b", a=1.0, b=None) == 1.0
    assert value("a ?? b", a=2.0, b=None) == 2.0
    assert value("1 > 2 < b ? 1 : 0", b=None) == 0.0  # the chain stops at the first false comparison


def test_nan_is_a_value_not_nil() -> None:
    with pytest.raises(ValueError, match="nan"):
        value("a ?? 1", a=math.nan)


# -- refusals


@pytest.mark.parametrize(
    ("text", "token", "position"),
    [
        ('"x"', '"', 0),
        ("'x' + 1", "'", 0),
        ("len(x)", "len", 0),
        ("float(x)", "float", 0),
        ("x.y", ".", 1),
        ("x?.y", ".", 2),
        ("x[0]", "[", 1),
        ("[1, 2]", "[", 0),
        ("{a: 1}", "{", 0),
        ("let y = x; y", "let", 0),
        ("x | abs()", "|", 2),
        ("map(x, # + 1)", "map", 0),
        ("true ? 1 : 0", "true", 0),
        ("nil ?? 1", "nil", 0),
        ("x in y", "in", 2),
        ("a ?: b", ":", 3),
        ("0x1F", "0x1F", 0),
        ("2x", "2x", 0),
        ("1e", "1e", 0),
        ("1e400", "1e400", 0),
        ("9223372036854775808", "9223372036854775808", 0),
        ("max()", ")", 4),
        ("abs(1, 2)", "abs", 0),
        ("a b", "b", 2),
        ("(a", "", 2),
        ("", "", 0),
        ("a // comment", "/", 3),
        ("a = 1", "=", 2),
        ("a & b", "&", 2),
        ("a ; b", ";", 2),
        ("é", "é", 0),
    ],
)
def test_refused_syntax_names_the_token_and_position(text: str, token: str, position: int) -> None:
    error = refusal(text)
    assert (error.token, error.position) == (token, position)
    assert f"at position {position}" in str(error)
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("text", "token", "position"),
    [
        ("a % 2", "%", 2),  # inputs are float64: expr's checker wants two ints for %
        ("a && b", "&&", 2),
        ("a ? 1 : 0", "?", 2),
        ("!a", "!", 0),
        ("!a * 2", "!", 0),  # ! (50) takes a * 2 as its operand
        ("1 + (a > 1)", "+", 2),
        ("not a", "not", 0),
        ("a > 1", ">", 2),  # a boolean result: KEDA's float(...) wrapper refuses it
        ("max(a, 1 > 2)", "max", 0),
        ("1 == (1 > 2) ? 1 : 0", "==", 2),
    ],
)
def test_type_errors_are_refused_when_parsed(text: str, token: str, position: int) -> None:
    error = refusal(text)
    assert (error.token, error.position) == (token, position)


def test_unknown_names_are_refused_where_they_stand() -> None:
    error = refusal("a + bb", known={"a", "b"})
    assert (error.token, error.position) == ("bb", 4)
    assert parse_formula("a + b", known=["a", "b"]).names == frozenset({"a", "b"})


def test_a_function_name_can_still_be_an_input() -> None:
    assert value("max + 1", max=2.0) == 3.0


def test_length_limit() -> None:
    longest = "1" + "+1" * ((MAX_LENGTH - 1) // 2)
    assert len(longest) == MAX_LENGTH - 1 or len(longest) == MAX_LENGTH
    assert value(longest) == float(longest.count("1"))  # a long left chain adds no depth
    too_long = longest + " " * (MAX_LENGTH + 1 - len(longest))
    error = refusal(too_long)
    assert error.position == MAX_LENGTH


def test_nesting_limit() -> None:
    assert value("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH, a=1.0) == 1.0
    error = refusal("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1))
    assert (error.token, error.position) == ("(", MAX_DEPTH)


def test_deepest_allowed_nesting_climbs_every_precedence_level() -> None:
    # Each level climbs through ||, &&, ==, +, *, ** and unary - before its parenthesis: the most recursion
    # 32 levels can ask of the parser, the type check and the evaluator, all within 1024 characters.
    level = "(1>2||1<2&&1==1+2*3**-{}??1?1:0)"
    text = "a"
    for _ in range(MAX_DEPTH):
        text = level.format(text)
    assert len(text) <= MAX_LENGTH
    assert value(text, a=0.0) == 0.0


def test_unparenthesised_nesting_is_bounded_without_recursion_errors() -> None:
    assert value("a > 1 ? 1 : " * 80 + "2", a=0.0) == 2.0
    assert value("-" * 300 + "a", a=1.0) == 1.0
    for text in ["-" * 600 + "a", "2" + "**2" * 340, "!" * 600 + "(a > 1)"]:
        error = refusal(text)
        assert "nested too deeply" in str(error)
