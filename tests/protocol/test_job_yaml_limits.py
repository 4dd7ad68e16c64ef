"""Hostile or broken input (size, alias bombs, nesting, encodings): one clear problem each."""

from __future__ import annotations

from job_helpers import MINIMAL_JOB, problems_of

from pai.protocol import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_EXPANDED_CHARACTERS,
    MAX_NODES,
    parse_job,
)


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels + 1):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_document_is_refused_before_it_expands() -> None:
    (problem,) = problems_of(billion_laughs())

    assert f"more than {MAX_NODES} YAML nodes" in problem.message
    assert "alias *a3" in problem.message
    assert problem.line == 5


def test_a_large_scalar_multiplied_by_aliases_is_refused_before_it_expands() -> None:
    """A few hundred kilobytes that thousands of aliases would make gigabytes of commands."""
    many = ", ".join(["*big"] * 20_000)
    text = f"{MINIMAL_JOB}parameters:\n  big: &big {'x' * 200_000}\n  many: [{many}]\n"

    (problem,) = problems_of(text)

    assert f"expands to more than {MAX_EXPANDED_CHARACTERS} characters" in problem.message
    assert "alias *big" in problem.message


def test_a_scalar_used_through_a_few_aliases_is_fine() -> None:
    block = "y" * (MAX_DOCUMENT_BYTES // 8)
    text = f"{MINIMAL_JOB}parameters:\n  a: &a {block}\n  b: *a\n  c: *a\n"

    assert parse_job(text).parameters == {"a": block, "b": block, "c": block}


def test_a_few_aliases_are_fine() -> None:
    spec = parse_job(MINIMAL_JOB + "parameters:\n  x: &x [1, 2]\n  y: *x\n")

    assert spec.parameters == {"x": [1, 2], "y": [1, 2]}


def test_an_oversize_document_is_refused_without_parsing_it() -> None:
    text = MINIMAL_JOB + "#" + "x" * MAX_DOCUMENT_BYTES + "\n"

    (problem,) = problems_of(text)

    assert "at most 1048576 bytes" in problem.message
    assert problem.line is None


def test_size_is_counted_in_utf8_bytes() -> None:
    comment = "#" + "é" * (MAX_DOCUMENT_BYTES // 2) + "\n"  # fewer characters than the limit

    (problem,) = problems_of(MINIMAL_JOB + comment)

    assert "bytes long" in problem.message


def test_deep_nesting_is_refused() -> None:
    (problem,) = problems_of("[" * 200_000)

    assert problem.message == f"the document nests more than {MAX_DEPTH} levels deep"
    assert (problem.line, problem.column) == (1, MAX_DEPTH + 1)


def test_nesting_through_aliases_counts_too() -> None:
    half = MAX_DEPTH // 2 + 5
    text = f"a: &a {'[' * half}1{']' * half}\nb: &b {'[' * half}*a{']' * half}\n"

    (problem,) = problems_of(text)

    assert "levels deep" in problem.message
    assert problem.line == 2


def test_bytes_must_be_utf8_and_the_problem_has_a_line() -> None:
    (problem,) = problems_of(b"protocolVersion: 2\nname: caf\xe9\n")

    assert problem.message == "the file is not UTF-8 text"
    assert (problem.line, problem.column) == (2, 10)


def test_utf8_bytes_parse_like_text() -> None:
    spec = parse_job(
        MINIMAL_JOB.replace("test-job", "job").encode() + "description: café\n".encode()
    )

    assert spec.description == "café"


def test_a_byte_order_mark_is_accepted() -> None:
    assert parse_job("\ufeff" + MINIMAL_JOB).name == "test-job"


def test_a_lone_surrogate_is_refused_with_its_place() -> None:
    (problem,) = problems_of("protocolVersion: 2\nname: \ud800\n")

    assert problem.message == "the text contains an invalid character"
    assert (problem.line, problem.column) == (2, 7)


def test_a_control_character_is_a_yaml_error_with_its_place() -> None:
    (problem,) = problems_of("protocolVersion: 2\nname: a\x07b\n")

    assert problem.message.startswith("invalid YAML")
    assert problem.line == 2


def test_python_tags_are_never_constructed() -> None:
    text = MINIMAL_JOB + "parameters:\n  x: !!python/object/apply:os.system ['echo pwned']\n"

    problems = problems_of(text)

    assert [(p.path, p.line) for p in problems] == [("parameters.x", 15)]
    assert "!!python/object/apply:os.system is not supported" in problems[0].message
