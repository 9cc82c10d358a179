"""shared.selectors: grammar tables, matching, LabelSelector conversion and properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.selectors import Operator, Requirement, Selector, parse_selector

VALID = [
    # (input, canonical String() as Go prints it)
    ("", ""),
    ("   ", ""),
    ("x=a", "x=a"),
    ("x==a", "x==a"),
    ("x!=a", "x!=a"),
    ("x", "x"),
    ("!x", "!x"),
    (" ! x ", "!x"),
    ("x in (b,a)", "x in (a,b)"),
    ("x notin(a)", "x notin (a)"),
    ("x in (a,a,b)", "x in (a,b)"),
    ("x=", "x="),
    ("x in ()", "x in ()"),
    ("x in (,a)", "x in (,a)"),
    ("x in (a,)", "x in (,a)"),
    ("x in (a,,b)", "x in (,a,b)"),
    ("in=notin", "in=notin"),
    ("x in (in,notin)", "x in (in,notin)"),
    ("z=1, a=2,\tm", "a=2,m,z=1"),
    ("b=1,a=2,b!=3", "a=2,b=1,b!=3"),
    ("x>1", "x>1"),
    ("x<10", "x<10"),
    ("app.kubernetes.io/name=web", "app.kubernetes.io/name=web"),
    ("example.com/My_Key-1.x=Val.ue_1", "example.com/My_Key-1.x=Val.ue_1"),
    ("x=" + "v" * 63, "x=" + "v" * 63),
]

INVALID = [
    ",",
    "x=a,",
    ",x=a",
    "x=a,,y=b",
    "x y",
    "x in a",
    "x in (a",
    "x in (a b)",
    "x in (a)(",
    "!x=a",
    "x=(",
    "x==a=b",
    "x=a b",
    "x!y",
    "=a",
    "!",
    "x>a",
    "x<",
    "x>-1",
    "x>99999999999999999999",
    "x=-a",
    "x=a-",
    "x=" + "v" * 64,
    "/x=a",
    "a/b/c=d",
    "Example.com/x=a",
    "-x=a",
    "x_=a",
    "a" * 64,
    "x=ü",
]


@pytest.mark.parametrize(("text", "canonical"), VALID)
def test_valid_selectors(text: str, canonical: str) -> None:
    selector = parse_selector(text)
    assert str(selector) == canonical
    assert parse_selector(canonical) == selector


@pytest.mark.parametrize("text", INVALID)
def test_invalid_selectors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(text)


def test_error_messages_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"found ',', expected: !, identifier, or 'end of string'"):
        parse_selector(",")
    with pytest.raises(ValueError, match=r"unable to parse requirement: found 'b', expected: in, notin"):
        parse_selector("a b")
    with pytest.raises(ValueError, match="name part must be no more than 63 characters"):
        parse_selector("a" * 64)
    with pytest.raises(ValueError, match="invalid label value"):
        parse_selector("x=-a")


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("", {}, True),
        ("", {"a": "b"}, True),
        ("x=a", {"x": "a"}, True),
        ("x=a", {"x": "b"}, False),
        ("x=a", {}, False),
        ("x==a", {"x": "a", "y": "b"}, True),
        ("x!=a", {}, True),
        ("x!=a", {"x": "a"}, False),
        ("x!=a", {"x": "b"}, True),
        ("x in (a,b)", {"x": "b"}, True),
        ("x in (a,b)", {"x": "c"}, False),
        ("x in (a,b)", {}, False),
        ("x notin (a,b)", {}, True),
        ("x notin (a,b)", {"x": "a"}, False),
        ("x", {"x": ""}, True),
        ("x", {"y": "x"}, False),
        ("!x", {"y": "x"}, True),
        ("!x", {"x": ""}, False),
        ("x=", {"x": ""}, True),
        ("x=", {}, False),
        ("x in ()", {"x": ""}, True),
        ("x>1", {"x": "2"}, True),
        ("x>1", {"x": "1"}, False),
        ("x>1", {"x": "a"}, False),
        ("x>1", {}, False),
        ("x<1", {"x": "-5"}, True),
        ("x<1", {"x": " 0"}, False),
        ("x<1", {"x": "0_0"}, False),
        ("x=a,y", {"x": "a"}, False),
        ("x=a,y", {"x": "a", "y": "1"}, True),
        ("x=a,x=b", {"x": "a"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


def test_everything_and_nothing_are_distinct() -> None:
    everything, nothing = Selector.everything(), Selector.nothing()
    assert everything.is_empty() and not nothing.is_empty()
    assert everything.matches({"a": "b"}) and not nothing.matches({}) and not nothing.matches({"a": "b"})
    assert everything != nothing
    assert parse_selector("") == everything
    assert Selector.from_label_selector(None) == nothing
    assert Selector.from_label_selector({}) == everything
    assert Selector.from_label_selector({"matchLabels": None, "matchExpressions": None}) == everything
    assert nothing.to_label_selector() is None
    assert everything.to_label_selector() == {}


def test_from_label_selector() -> None:
    selector = Selector.from_label_selector(
        {
            "matchLabels": {"b": "1", "a": "2"},
            "matchExpressions": [
                {"key": "c", "operator": "In", "values": ["y", "x"]},
                {"key": "d", "operator": "NotIn", "values": ["z"]},
                {"key": "e", "operator": "Exists"},
                {"key": "f", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(selector) == "a=2,b=1,c in (x,y),d notin (z),e,!f"
    assert [r.key for r in selector] == ["a", "b", "c", "d", "e", "f"]
    assert selector.requirements[2] == Requirement("c", Operator.IN, ("x", "y"))
    assert selector.matches({"a": "2", "b": "1", "c": "x", "e": ""})
    assert not selector.matches({"a": "2", "b": "1", "c": "x", "e": "", "f": ""})


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "not a valid label"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "must be empty"),
        ({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}, "invalid label key"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "key must be a string"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}, "list of strings"),
        ({"matchExpressions": ["a"]}, "must be objects"),
        ({"matchExpressions": {"a": "b"}}, "must be a list"),
        ({"matchLabels": {"a": "-"}}, "invalid label value"),
        ({"matchLabels": {"a": 1}}, "strings to strings"),
        ({"matchLabels": ["a"]}, "matchLabels must be an object"),
        ("a=b", "must be an object"),
    ],
)
def test_from_label_selector_rejects(obj: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Selector.from_label_selector(obj)  # type: ignore[arg-type]


def test_to_label_selector() -> None:
    selector = parse_selector("a=1,a=2,b==3,c!=4,d in (5,6),e notin (7),f,!g")
    assert selector.to_label_selector() == {
        "matchLabels": {"a": "1", "b": "3"},
        "matchExpressions": [
            {"key": "a", "operator": "In", "values": ["2"]},
            {"key": "c", "operator": "NotIn", "values": ["4"]},
            {"key": "d", "operator": "In", "values": ["5", "6"]},
            {"key": "e", "operator": "NotIn", "values": ["7"]},
            {"key": "f", "operator": "Exists"},
            {"key": "g", "operator": "DoesNotExist"},
        ],
    }
    with pytest.raises(ValueError, match="can't convert"):
        parse_selector("a>1").to_label_selector()


def test_requirement_validates_like_go() -> None:
    assert Requirement("a", "in", ("b", "a", "b")).values == ("a", "b")  # type: ignore[arg-type]
    assert Requirement("a", Operator.IN, ("b",)).operator is Operator.IN
    with pytest.raises(ValueError, match="one single value"):
        Requirement("a", Operator.EQUALS, ("b", "c"))
    with pytest.raises(ValueError):
        Requirement("a", "like", ("b",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no requirements"):
        Selector((Requirement("a", Operator.EXISTS),), selects_nothing=True)


# ---- properties ------------------------------------------------------------------------------------------

_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?", fullmatch=True)
_prefixes = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?(\.[a-z0-9]{1,4}){0,2}", fullmatch=True)
_keys = st.one_of(_names, st.sampled_from(["in", "notin"]), st.builds("{}/{}".format, _prefixes, _names))
_values = st.one_of(st.just(""), _names, st.sampled_from(["in", "notin"]))
_integers = st.integers(min_value=0, max_value=10**6).map(str)


@st.composite
def requirements(draw: st.DrawFn, numeric: bool = True) -> Requirement:
    operators = [op for op in Operator if numeric or op not in (Operator.GREATER_THAN, Operator.LESS_THAN)]
    operator = draw(st.sampled_from(operators))
    key = draw(_keys)
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        return Requirement(key, operator)
    if operator in (Operator.IN, Operator.NOT_IN):
        return Requirement(key, operator, tuple(draw(st.lists(_values, min_size=1, max_size=4))))
    if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        return Requirement(key, operator, (draw(_integers),))
    return Requirement(key, operator, (draw(_values),))


selectors = st.lists(requirements(), max_size=5).map(lambda reqs: Selector(tuple(reqs)))
json_selectors = st.lists(requirements(numeric=False), max_size=5).map(lambda reqs: Selector(tuple(reqs)))
_label_sets = st.dictionaries(_keys, st.one_of(_values, _integers), max_size=6)


@given(selector=selectors)
def test_string_round_trip(selector: Selector) -> None:
    assert parse_selector(str(selector)) == selector


@given(selector=json_selectors, labels=_label_sets)
def test_label_selector_round_trip_keeps_meaning(selector: Selector, labels: dict[str, str]) -> None:
    converted = Selector.from_label_selector(selector.to_label_selector())
    assert converted.matches(labels) == selector.matches(labels)


_TOKENS = ["a", "b", "in", "notin", "=", "==", "!=", "!", ",", "(", ")", " ", ">", "1"]


@given(
    text=st.one_of(
        st.text(alphabet="ab=!,() \tinotx<>/.-_9", max_size=30),
        st.text(max_size=20),
        st.lists(st.sampled_from(_TOKENS)).map("".join),
    )
)
def test_arbitrary_text_parses_or_raises_value_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except ValueError:
        return
    assert parse_selector(str(selector)) == selector
