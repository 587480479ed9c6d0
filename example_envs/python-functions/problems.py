"""The problems of ``envhub-examples/python-functions``, written by hand for this environment.

Each :class:`Problem` is one function to write: its signature, what it must do, a few
example calls (their results are computed from the reference solution by ``generate.py``,
so a prompt can never disagree with its solution), the reference solution, and the tests.

Tests are written as Python, the way envhub's ``code-tests`` verifier reads test code:
every top-level ``assert`` is one test, and so is every top-level ``def test_...()``
(used here for "must raise" cases). Each problem has at least five tests, covering the
plain case, the edges the prompt names (empty input, negatives, ties) and at least one
case a careless solution gets wrong.

``generate.py`` turns the tests of a problem into data (code-tests' ``calls``) when every
one of them is ``assert NAME(literals) == literal`` (or ``is True``, ``is False``, ``is
None``); so write a test that way, with literals rather than expressions (``100_000``, not
``10**5``), whenever it can be. The rest stay Python test code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One function to write."""

    name: str
    signature: str
    difficulty: int  # 1: a few lines; 2: a small algorithm or careful edge cases; 3: both
    behaviour: str  # what the function must do, edge cases included
    examples: tuple[str, ...]  # calls shown in the prompt with their results
    solution: str
    tests: str


PROBLEMS: tuple[Problem, ...] = (
    # --- difficulty 1 ---------------------------------------------------------------------
    Problem(
        name="count_vowels",
        signature="count_vowels(text: str) -> int",
        difficulty=1,
        behaviour="Return how many vowels `text` contains. The vowels are a, e, i, o and u, in either "
                  "case; 'y' is not a vowel.",
        examples=('count_vowels("Hello World")', 'count_vowels("rhythm")'),
        solution='''
def count_vowels(text: str) -> int:
    return sum(1 for ch in text.lower() if ch in "aeiou")
''',
        tests='''
assert count_vowels("") == 0
assert count_vowels("banana") == 3
assert count_vowels("AEIOU aeiou") == 10
assert count_vowels("rhythm") == 0
assert count_vowels("Yellow yak") == 3
assert count_vowels("12 apples!") == 2
''',
    ),
    Problem(
        name="is_palindrome",
        signature="is_palindrome(text: str) -> bool",
        difficulty=1,
        behaviour="Return True if `text` reads the same forwards and backwards when only its letters and "
                  "digits are kept and case is ignored. A text with no letters or digits is a palindrome.",
        examples=('is_palindrome("Never odd or even")', 'is_palindrome("palindrome")'),
        solution='''
def is_palindrome(text: str) -> bool:
    kept = [ch.lower() for ch in text if ch.isalnum()]
    return kept == kept[::-1]
''',
        tests='''
assert is_palindrome("") is True
assert is_palindrome("a") is True
assert is_palindrome("Step on no pets") is True
assert is_palindrome("Was it a car or a cat I saw?") is True
assert is_palindrome("abca") is False
assert is_palindrome("12321") is True
assert is_palindrome("123-45") is False
assert is_palindrome("!!") is True
''',
    ),
    Problem(
        name="clamp",
        signature="clamp(value: float, low: float, high: float) -> float",
        difficulty=1,
        behaviour="Return `value` limited to the range from `low` to `high` inclusive: `low` if it is "
                  "smaller, `high` if it is larger, else `value` itself. Raise ValueError if `low` is "
                  "greater than `high`.",
        examples=("clamp(15, 0, 10)", "clamp(-2.5, -1, 1)"),
        solution='''
def clamp(value: float, low: float, high: float) -> float:
    if low > high:
        raise ValueError("low must not be greater than high")
    return min(max(value, low), high)
''',
        tests='''
assert clamp(5, 0, 10) == 5
assert clamp(-3, 0, 10) == 0
assert clamp(11, 0, 10) == 10
assert clamp(0.5, 0.5, 0.5) == 0.5
assert clamp(-7.25, -8, -7) == -7.25
def test_low_above_high_raises():
    try:
        clamp(1, 5, 2)
    except ValueError:
        return
    raise AssertionError("clamp(1, 5, 2) did not raise ValueError")
''',
    ),
    Problem(
        name="initials",
        signature="initials(full_name: str) -> str",
        difficulty=1,
        behaviour="Return the initials of a name: the first letter of each word, upper-cased, each "
                  "followed by a full stop. Words are separated by any amount of whitespace; hyphenated "
                  "parts count as one word.",
        examples=('initials("grace brewster hopper")', 'initials("  Jean-Paul   Sartre ")'),
        solution='''
def initials(full_name: str) -> str:
    return "".join(word[0].upper() + "." for word in full_name.split())
''',
        tests='''
assert initials("ada lovelace") == "A.L."
assert initials("Alan") == "A."
assert initials("") == ""
assert initials("  mary   ann  evans ") == "M.A.E."
assert initials("jean-luc picard") == "J.P."
''',
    ),
    Problem(
        name="sum_of_digits",
        signature="sum_of_digits(n: int) -> int",
        difficulty=1,
        behaviour="Return the sum of the decimal digits of the integer `n`. The sign is ignored, so a "
                  "negative number has the digit sum of its absolute value.",
        examples=("sum_of_digits(4096)", "sum_of_digits(-75)"),
        solution='''
def sum_of_digits(n: int) -> int:
    return sum(int(d) for d in str(abs(n)))
''',
        tests='''
assert sum_of_digits(0) == 0
assert sum_of_digits(7) == 7
assert sum_of_digits(1234) == 10
assert sum_of_digits(-905) == 14
assert sum_of_digits(100_000_000_000_000_000_000) == 1
assert sum_of_digits(999999) == 54
''',
    ),
    Problem(
        name="unique_in_order",
        signature="unique_in_order(items: list) -> list",
        difficulty=1,
        behaviour="Return a new list with the items of `items` in their original order, keeping only the "
                  "first occurrence of each value. The input list is not modified.",
        examples=("unique_in_order([3, 1, 3, 2, 1])", 'unique_in_order(["b", "a", "b"])'),
        solution='''
def unique_in_order(items: list) -> list:
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
''',
        tests='''
assert unique_in_order([]) == []
assert unique_in_order([1, 1, 1]) == [1]
assert unique_in_order([5, 4, 5, 3, 4, 2]) == [5, 4, 3, 2]
assert unique_in_order(["x", "y", "x", "z"]) == ["x", "y", "z"]
data = [2, 2, 1]
result = unique_in_order(data)
assert data == [2, 2, 1]
assert result == [2, 1]
''',
    ),
    Problem(
        name="chunk",
        signature="chunk(items: list, size: int) -> list[list]",
        difficulty=1,
        behaviour="Split `items` into consecutive lists of `size` items each; the last list holds what is "
                  "left over and may be shorter. Raise ValueError if `size` is less than 1.",
        examples=("chunk([1, 2, 3, 4, 5], 2)", "chunk([], 3)"),
        solution='''
def chunk(items: list, size: int) -> list[list]:
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[i:i + size] for i in range(0, len(items), size)]
''',
        tests='''
assert chunk([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]
assert chunk([1, 2, 3, 4, 5], 3) == [[1, 2, 3], [4, 5]]
assert chunk([1, 2], 5) == [[1, 2]]
assert chunk([], 1) == []
assert chunk(["a", "b", "c"], 1) == [["a"], ["b"], ["c"]]
def test_size_zero_raises():
    try:
        chunk([1, 2], 0)
    except ValueError:
        return
    raise AssertionError("chunk([1, 2], 0) did not raise ValueError")
''',
    ),
    Problem(
        name="is_leap_year",
        signature="is_leap_year(year: int) -> bool",
        difficulty=1,
        behaviour="Return True if `year` is a leap year in the Gregorian calendar: divisible by 4, except "
                  "years divisible by 100, which are leap years only when also divisible by 400.",
        examples=("is_leap_year(2024)", "is_leap_year(1900)"),
        solution='''
def is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
''',
        tests='''
assert is_leap_year(2000) is True
assert is_leap_year(2100) is False
assert is_leap_year(2023) is False
assert is_leap_year(1996) is True
assert is_leap_year(2400) is True
assert is_leap_year(1800) is False
''',
    ),
    Problem(
        name="mask_card_number",
        signature="mask_card_number(number: str) -> str",
        difficulty=1,
        behaviour="Return `number` with every digit except the last four replaced by '*'. Characters that "
                  "are not digits (spaces, dashes) stay as they are. A number with four digits or fewer is "
                  "returned unchanged.",
        examples=('mask_card_number("4111 1111 1111 1234")', 'mask_card_number("987")'),
        solution='''
def mask_card_number(number: str) -> str:
    digits = sum(ch.isdigit() for ch in number)
    to_mask = max(digits - 4, 0)
    out = []
    for ch in number:
        if ch.isdigit() and to_mask > 0:
            out.append("*")
            to_mask -= 1
        else:
            out.append(ch)
    return "".join(out)
''',
        tests='''
assert mask_card_number("1234567890") == "******7890"
assert mask_card_number("1234") == "1234"
assert mask_card_number("") == ""
assert mask_card_number("12-34-56") == "**-34-56"
assert mask_card_number("5500 0000 0000 0004") == "**** **** **** 0004"
''',
    ),
    Problem(
        name="longest_word",
        signature="longest_word(sentence: str) -> str",
        difficulty=1,
        behaviour="Return the longest word in `sentence`, where words are runs of letters (anything else "
                  "separates them). If several words share the greatest length, return the first of them. "
                  "Return an empty string if there is no word.",
        examples=('longest_word("The quick brown fox")', 'longest_word("fit, fat; fog")'),
        solution='''
import re


def longest_word(sentence: str) -> str:
    best = ""
    for word in re.findall(r"[A-Za-z]+", sentence):
        if len(word) > len(best):
            best = word
    return best
''',
        tests='''
assert longest_word("") == ""
assert longest_word("a bb ccc dd") == "ccc"
assert longest_word("one two six") == "one"
assert longest_word("well-known facts") == "known"
assert longest_word("Hello, world!") == "Hello"
assert longest_word("42 ... !!") == ""
''',
    ),
    Problem(
        name="differences",
        signature="differences(numbers: list[int]) -> list[int]",
        difficulty=1,
        behaviour="Return the differences between neighbouring numbers: element i of the result is "
                  "`numbers[i + 1] - numbers[i]`. A list with fewer than two numbers has no differences.",
        examples=("differences([1, 4, 9, 16])", "differences([5])"),
        solution='''
def differences(numbers: list[int]) -> list[int]:
    return [b - a for a, b in zip(numbers, numbers[1:])]
''',
        tests='''
assert differences([]) == []
assert differences([3]) == []
assert differences([3, 3]) == [0]
assert differences([10, 7, 12]) == [-3, 5]
assert differences([-2, 0, 2, 4]) == [2, 2, 2]
''',
    ),
    Problem(
        name="longest_common_prefix",
        signature="longest_common_prefix(words: list[str]) -> str",
        difficulty=1,
        behaviour="Return the longest string that every word in `words` starts with (case-sensitive). "
                  "Return an empty string for an empty list.",
        examples=('longest_common_prefix(["interview", "internet", "interval"])',
                  'longest_common_prefix(["cat", "dog"])'),
        solution='''
def longest_common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    prefix = words[0]
    for word in words[1:]:
        while not word.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
''',
        tests='''
assert longest_common_prefix([]) == ""
assert longest_common_prefix(["alone"]) == "alone"
assert longest_common_prefix(["flow", "flower", "flight"]) == "fl"
assert longest_common_prefix(["same", "same"]) == "same"
assert longest_common_prefix(["Apple", "apple"]) == ""
assert longest_common_prefix(["ab", "a", "abc"]) == "a"
''',
    ),
    Problem(
        name="is_prime",
        signature="is_prime(n: int) -> bool",
        difficulty=1,
        behaviour="Return True if `n` is a prime number. Numbers below 2 (zero and negatives included) are "
                  "not prime. It must be fast enough for n up to ten million.",
        examples=("is_prime(97)", "is_prime(1)"),
        solution='''
def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    i = 3
    while i * i <= n:
        if n % i == 0:
            return False
        i += 2
    return True
''',
        tests='''
assert is_prime(2) is True
assert is_prime(0) is False
assert is_prime(-7) is False
assert is_prime(91) is False
assert is_prime(9_999_991) is True
assert is_prime(10_000_000) is False
assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]
''',
    ),
    Problem(
        name="hex_to_rgb",
        signature="hex_to_rgb(color: str) -> tuple[int, int, int]",
        difficulty=1,
        behaviour="Convert a colour written as '#' and six hexadecimal digits (either case) into its red, "
                  "green and blue values, each 0 to 255.",
        examples=('hex_to_rgb("#ff8000")', 'hex_to_rgb("#0A0B0C")'),
        solution='''
def hex_to_rgb(color: str) -> tuple[int, int, int]:
    digits = color.lstrip("#")
    return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16))
''',
        tests='''
assert hex_to_rgb("#000000") == (0, 0, 0)
assert hex_to_rgb("#ffffff") == (255, 255, 255)
assert hex_to_rgb("#FFFFFF") == (255, 255, 255)
assert hex_to_rgb("#1a2b3c") == (26, 43, 60)
assert hex_to_rgb("#800000") == (128, 0, 0)
''',
    ),
    Problem(
        name="pascal_row",
        signature="pascal_row(n: int) -> list[int]",
        difficulty=1,
        behaviour="Return row `n` of Pascal's triangle, counting from row 0, which is [1]. Each row starts "
                  "and ends with 1, and every other entry is the sum of the two entries above it.",
        examples=("pascal_row(4)", "pascal_row(0)"),
        solution='''
def pascal_row(n: int) -> list[int]:
    row = [1]
    for _ in range(n):
        row = [1] + [a + b for a, b in zip(row, row[1:])] + [1]
    return row
''',
        tests='''
assert pascal_row(0) == [1]
assert pascal_row(1) == [1, 1]
assert pascal_row(2) == [1, 2, 1]
assert pascal_row(5) == [1, 5, 10, 10, 5, 1]
assert sum(pascal_row(20)) == 2 ** 20
assert pascal_row(30)[15] == 155117520
''',
    ),
    Problem(
        name="digital_root",
        signature="digital_root(n: int) -> int",
        difficulty=1,
        behaviour="Return the digital root of the non-negative integer `n`: add up its decimal digits, then "
                  "the digits of that sum, and so on, until a single digit is left.",
        examples=("digital_root(9875)", "digital_root(0)"),
        solution='''
def digital_root(n: int) -> int:
    while n >= 10:
        n = sum(int(d) for d in str(n))
    return n
''',
        tests='''
assert digital_root(0) == 0
assert digital_root(7) == 7
assert digital_root(38) == 2
assert digital_root(99999) == 9
assert digital_root(10) == 1
assert digital_root(123456789012345678901234567890) == 9
''',
    ),
    Problem(
        name="truncate",
        signature="truncate(text: str, width: int) -> str",
        difficulty=1,
        behaviour="Return `text` unchanged if it has at most `width` characters. Otherwise cut it so that, "
                  "with '...' appended, the result is exactly `width` characters long. `width` is at least 3.",
        examples=('truncate("The quick brown fox", 10)', 'truncate("short", 10)'),
        solution='''
def truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[:width - 3] + "..."
''',
        tests='''
assert truncate("", 5) == ""
assert truncate("hello", 5) == "hello"
assert truncate("hello!", 5) == "he..."
assert truncate("abcdef", 3) == "..."
assert len(truncate("x" * 100, 42)) == 42
assert truncate("environment", 8) == "envir..."
''',
    ),
    Problem(
        name="count_words",
        signature="count_words(text: str) -> dict[str, int]",
        difficulty=1,
        behaviour="Count how often each word occurs in `text`. Words are runs of letters and apostrophes, "
                  "compared in lower case; the keys of the result are the lower-case words.",
        examples=('count_words("The cat saw the other cat")', 'count_words("")'),
        solution='''
import re


def count_words(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in re.findall(r"[a-z']+", text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return counts
''',
        tests='''
assert count_words("") == {}
assert count_words("Go go GO") == {"go": 3}
assert count_words("one, two; one.") == {"one": 2, "two": 1}
assert count_words("don't stop, don't") == {"don't": 2, "stop": 1}
assert count_words("x1y") == {"x": 1, "y": 1}
''',
    ),
    # --- difficulty 2 ---------------------------------------------------------------------
    Problem(
        name="run_length_encode",
        signature="run_length_encode(text: str) -> str",
        difficulty=2,
        behaviour="Compress `text` by replacing each run of a repeated character with the run's length "
                  "followed by the character, e.g. 'aaab' becomes '3a1b'. `text` contains no digits.",
        examples=('run_length_encode("aaabccdddd")', 'run_length_encode("")'),
        solution='''
from itertools import groupby


def run_length_encode(text: str) -> str:
    return "".join(f"{len(list(group))}{ch}" for ch, group in groupby(text))
''',
        tests='''
assert run_length_encode("") == ""
assert run_length_encode("a") == "1a"
assert run_length_encode("abc") == "1a1b1c"
assert run_length_encode("aaaaaaaaaaaa") == "12a"
assert run_length_encode("aabaa") == "2a1b2a"
assert run_length_encode("  !!") == "2 2!"
''',
    ),
    Problem(
        name="run_length_decode",
        signature="run_length_decode(encoded: str) -> str",
        difficulty=2,
        behaviour="Undo run-length encoding: `encoded` is a sequence of counts (one or more decimal digits) "
                  "each followed by one character that is not a digit; expand each pair into the character "
                  "repeated count times.",
        examples=('run_length_decode("3a1b2c")', 'run_length_decode("10x")'),
        solution='''
import re


def run_length_decode(encoded: str) -> str:
    return "".join(ch * int(count) for count, ch in re.findall(r"(\\d+)(\\D)", encoded))
''',
        tests='''
assert run_length_decode("") == ""
assert run_length_decode("1a") == "a"
assert run_length_decode("2a1b2a") == "aabaa"
assert run_length_decode("12z") == "z" * 12
assert run_length_decode("3 1!") == "   !"
assert run_length_decode("100q") == "q" * 100
''',
    ),
    Problem(
        name="balanced_brackets",
        signature="balanced_brackets(text: str) -> bool",
        difficulty=2,
        behaviour="Return True if the brackets (), [] and {} in `text` are balanced: every opening bracket "
                  "is closed by the matching kind, in the right order. Other characters are ignored.",
        examples=('balanced_brackets("f(a[1], {b: 2})")', 'balanced_brackets("([)]")'),
        solution='''
def balanced_brackets(text: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack
''',
        tests='''
assert balanced_brackets("") is True
assert balanced_brackets("no brackets") is True
assert balanced_brackets("{[()()]}") is True
assert balanced_brackets("(") is False
assert balanced_brackets(")(") is False
assert balanced_brackets("(]") is False
assert balanced_brackets("[{}](){}") is True
assert balanced_brackets("((())") is False
''',
    ),
    Problem(
        name="flatten",
        signature="flatten(nested: list) -> list",
        difficulty=2,
        behaviour="Return the items of `nested` in order with every level of list nesting removed, however "
                  "deep. Only lists are flattened: strings, tuples and other values are items.",
        examples=("flatten([1, [2, [3, [4]]], 5])", 'flatten([["a", ("b", "c")], []])'),
        solution='''
def flatten(nested: list) -> list:
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
''',
        tests='''
assert flatten([]) == []
assert flatten([[], [[]]]) == []
assert flatten([1, 2, 3]) == [1, 2, 3]
assert flatten([[1], [2, [3]], [[[4]]]]) == [1, 2, 3, 4]
assert flatten(["ab", ["cd"]]) == ["ab", "cd"]
assert flatten([(1, [2])]) == [(1, [2])]
''',
    ),
    Problem(
        name="group_by_first_letter",
        signature="group_by_first_letter(words: list[str]) -> dict[str, list[str]]",
        difficulty=2,
        behaviour="Group non-empty `words` by their first letter, lower-cased. Each key is a lower-case "
                  "letter and its list holds the words that start with it (in either case), in their "
                  "original order. Empty strings are skipped.",
        examples=('group_by_first_letter(["apple", "Bean", "avocado", "beet"])',),
        solution='''
def group_by_first_letter(words: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for word in words:
        if word:
            groups.setdefault(word[0].lower(), []).append(word)
    return groups
''',
        tests='''
assert group_by_first_letter([]) == {}
assert group_by_first_letter([""]) == {}
assert group_by_first_letter(["kiwi"]) == {"k": ["kiwi"]}
assert group_by_first_letter(["Tea", "toast", "tea"]) == {"t": ["Tea", "toast", "tea"]}
assert group_by_first_letter(["b", "a", "bb"]) == {"b": ["b", "bb"], "a": ["a"]}
''',
    ),
    Problem(
        name="rotate",
        signature="rotate(items: list, k: int) -> list",
        difficulty=2,
        behaviour="Return a new list with `items` rotated `k` places to the right: the last `k` items move "
                  "to the front. A negative `k` rotates to the left, and `k` may be larger than the list.",
        examples=("rotate([1, 2, 3, 4, 5], 2)", "rotate([1, 2, 3], -1)"),
        solution='''
def rotate(items: list, k: int) -> list:
    if not items:
        return []
    k %= len(items)
    return items[-k:] + items[:-k] if k else list(items)
''',
        tests='''
assert rotate([], 3) == []
assert rotate([1, 2, 3], 0) == [1, 2, 3]
assert rotate([1, 2, 3], 1) == [3, 1, 2]
assert rotate([1, 2, 3], 3) == [1, 2, 3]
assert rotate([1, 2, 3], 7) == [3, 1, 2]
assert rotate([1, 2, 3, 4], -1) == [2, 3, 4, 1]
assert rotate(["a"], -5) == ["a"]
''',
    ),
    Problem(
        name="caesar_shift",
        signature="caesar_shift(text: str, shift: int) -> str",
        difficulty=2,
        behaviour="Shift every English letter in `text` `shift` places along the alphabet, wrapping from z "
                  "back to a, and keep its case. `shift` may be negative or larger than 26. Other "
                  "characters are unchanged.",
        examples=('caesar_shift("Hello, World!", 3)', 'caesar_shift("abc", -1)'),
        solution='''
def caesar_shift(text: str, shift: int) -> str:
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + shift) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + shift) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)
''',
        tests='''
assert caesar_shift("", 5) == ""
assert caesar_shift("xyz", 3) == "abc"
assert caesar_shift("ABC", -3) == "XYZ"
assert caesar_shift("Zebra 42!", 1) == "Afcsb 42!"
assert caesar_shift("same", 26) == "same"
assert caesar_shift("wrap", 55) == "zuds"
assert caesar_shift("é", 1) == "é"
''',
    ),
    Problem(
        name="parse_duration",
        signature="parse_duration(text: str) -> int",
        difficulty=2,
        behaviour="Return the number of seconds in a duration such as '1h30m' or '2m5s': one or more parts, "
                  "each a whole number followed by 'h', 'm' or 's', with each unit at most once and in "
                  "that order. Raise ValueError for anything else, the empty string included.",
        examples=('parse_duration("1h30m15s")', 'parse_duration("45s")'),
        solution='''
import re


def parse_duration(text: str) -> int:
    match = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", text)
    if not text or match is None:
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(part) if part else 0 for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds
''',
        tests='''
assert parse_duration("0s") == 0
assert parse_duration("2h") == 7200
assert parse_duration("90m") == 5400
assert parse_duration("1h1s") == 3601
assert parse_duration("10h59m59s") == 39599
def test_rejects_bad_input():
    for bad in ["", "5", "1m2h", "1x", "h", "1h 2m", "-1s"]:
        try:
            parse_duration(bad)
        except ValueError:
            continue
        raise AssertionError(f"parse_duration({bad!r}) did not raise ValueError")
''',
    ),
    Problem(
        name="format_duration",
        signature="format_duration(seconds: int) -> str",
        difficulty=2,
        behaviour="Write a non-negative number of seconds as hours, minutes and seconds, like '1h 2m 3s'. "
                  "Parts that are zero are left out; zero seconds is written '0s'.",
        examples=("format_duration(3723)", "format_duration(3600)"),
        solution='''
def format_duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if value]
    return " ".join(parts) or "0s"
''',
        tests='''
assert format_duration(0) == "0s"
assert format_duration(59) == "59s"
assert format_duration(60) == "1m"
assert format_duration(3601) == "1h 1s"
assert format_duration(86399) == "23h 59m 59s"
assert format_duration(90000) == "25h"
''',
    ),
    Problem(
        name="merge_sorted",
        signature="merge_sorted(a: list[int], b: list[int]) -> list[int]",
        difficulty=2,
        behaviour="Merge two lists that are each sorted in ascending order into one sorted list, keeping "
                  "duplicates. Do it in a single pass over both lists, without calling sort or sorted.",
        examples=("merge_sorted([1, 4, 9], [2, 3, 10])", "merge_sorted([], [5])"),
        solution='''
def merge_sorted(a: list[int], b: list[int]) -> list[int]:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out + a[i:] + b[j:]
''',
        tests='''
assert merge_sorted([], []) == []
assert merge_sorted([1, 2], []) == [1, 2]
assert merge_sorted([1, 1, 3], [1, 2]) == [1, 1, 1, 2, 3]
assert merge_sorted([-5, 0], [-10, 7]) == [-10, -5, 0, 7]
assert merge_sorted(list(range(0, 100, 2)), list(range(1, 100, 2))) == list(range(100))
''',
    ),
    Problem(
        name="most_common_letter",
        signature="most_common_letter(text: str) -> str",
        difficulty=2,
        behaviour="Return the letter that occurs most often in `text`, in lower case, counting upper- and "
                  "lower-case forms together and ignoring everything that is not a letter. On a tie return "
                  "the letter that comes first in the alphabet. Return '' if there are no letters.",
        examples=('most_common_letter("Mississippi")', 'most_common_letter("abcabc")'),
        solution='''
from collections import Counter


def most_common_letter(text: str) -> str:
    counts = Counter(ch for ch in text.lower() if ch.isalpha())
    if not counts:
        return ""
    return min(counts, key=lambda ch: (-counts[ch], ch))
''',
        tests='''
assert most_common_letter("") == ""
assert most_common_letter("123 !") == ""
assert most_common_letter("z") == "z"
assert most_common_letter("bbaa") == "a"
assert most_common_letter("AaB") == "a"
assert most_common_letter("Hello World") == "l"
''',
    ),
    Problem(
        name="transpose",
        signature="transpose(matrix: list[list[int]]) -> list[list[int]]",
        difficulty=2,
        behaviour="Return the transpose of a rectangular matrix given as a list of rows: row i of the "
                  "result is column i of `matrix`. The transpose of an empty matrix is an empty list.",
        examples=("transpose([[1, 2, 3], [4, 5, 6]])", "transpose([[7]])"),
        solution='''
def transpose(matrix: list[list[int]]) -> list[list[int]]:
    return [list(column) for column in zip(*matrix)]
''',
        tests='''
assert transpose([]) == []
assert transpose([[1]]) == [[1]]
assert transpose([[1, 2]]) == [[1], [2]]
assert transpose([[1], [2], [3]]) == [[1, 2, 3]]
assert transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]
assert transpose(transpose([[1, 2, 3], [4, 5, 6]])) == [[1, 2, 3], [4, 5, 6]]
''',
    ),
    Problem(
        name="compress_ranges",
        signature="compress_ranges(numbers: list[int]) -> str",
        difficulty=2,
        behaviour="Describe a list of integers, sorted ascending and without duplicates, as comma-separated "
                  "ranges: a run of two or more consecutive integers is written 'first-last', a lone number "
                  "as itself. No spaces.",
        examples=("compress_ranges([1, 2, 3, 5, 7, 8])", "compress_ranges([4])"),
        solution='''
def compress_ranges(numbers: list[int]) -> str:
    parts = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        parts.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ",".join(parts)
''',
        tests='''
assert compress_ranges([]) == ""
assert compress_ranges([7]) == "7"
assert compress_ranges([1, 2]) == "1-2"
assert compress_ranges([1, 3, 5]) == "1,3,5"
assert compress_ranges([0, 1, 2, 10, 11, 20]) == "0-2,10-11,20"
assert compress_ranges([-3, -2, -1, 1]) == "-3--1,1"
''',
    ),
    Problem(
        name="expand_ranges",
        signature="expand_ranges(spec: str) -> list[int]",
        difficulty=2,
        behaviour="Expand a comma-separated list of non-negative integers and ranges 'a-b' (both ends "
                  "included, a <= b) into the list of integers, in the order written. Spaces around "
                  "items are allowed. The empty string gives an empty list.",
        examples=('expand_ranges("1-3,7,10-12")', 'expand_ranges(" 4 , 2-3 ")'),
        solution='''
def expand_ranges(spec: str) -> list[int]:
    out: list[int] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        if "-" in item:
            first, last = item.split("-")
            out.extend(range(int(first), int(last) + 1))
        else:
            out.append(int(item))
    return out
''',
        tests='''
assert expand_ranges("") == []
assert expand_ranges("5") == [5]
assert expand_ranges("2-2") == [2]
assert expand_ranges("0-4") == [0, 1, 2, 3, 4]
assert expand_ranges("9,1-2") == [9, 1, 2]
assert expand_ranges(" 1 - 3 , 8 ") == [1, 2, 3, 8]
''',
    ),
    Problem(
        name="evaluate_rpn",
        signature="evaluate_rpn(expression: str) -> float",
        difficulty=2,
        behaviour="Evaluate an arithmetic expression in reverse Polish notation: numbers and the operators "
                  "+ - * / separated by spaces, each operator applying to the two values before it. Return "
                  "the result as a float. Raise ValueError if the expression does not leave exactly one "
                  "value, or an operator lacks operands.",
        examples=('evaluate_rpn("3 4 + 2 *")', 'evaluate_rpn("10 4 /")'),
        solution='''
def evaluate_rpn(expression: str) -> float:
    stack: list[float] = []
    for token in expression.split():
        if token in ("+", "-", "*", "/"):
            if len(stack) < 2:
                raise ValueError(f"operator {token} needs two operands")
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if token == "+" else a - b if token == "-" else a * b if token == "*" else a / b)
        else:
            stack.append(float(token))
    if len(stack) != 1:
        raise ValueError("the expression must leave exactly one value")
    return stack[0]
''',
        tests='''
assert evaluate_rpn("42") == 42.0
assert evaluate_rpn("5 3 -") == 2.0
assert evaluate_rpn("2 3 4 * +") == 14.0
assert evaluate_rpn("1 2 + 3 4 + *") == 21.0
assert evaluate_rpn("7 2 /") == 3.5
assert evaluate_rpn("-2 3.5 *") == -7.0
def test_malformed_expressions_raise():
    for bad in ["", "1 2", "+", "1 +"]:
        try:
            evaluate_rpn(bad)
        except ValueError:
            continue
        raise AssertionError(f"evaluate_rpn({bad!r}) did not raise ValueError")
''',
    ),
    Problem(
        name="roman_to_int",
        signature="roman_to_int(numeral: str) -> int",
        difficulty=2,
        behaviour="Convert a Roman numeral in upper case (I, V, X, L, C, D, M, with the subtractive forms "
                  "IV, IX, XL, XC, CD and CM) to an integer. The input is always a valid numeral from 1 "
                  "to 3999.",
        examples=('roman_to_int("XIV")', 'roman_to_int("MCMXCIV")'),
        solution='''
def roman_to_int(numeral: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for ch, nxt in zip(numeral, numeral[1:] + " "):
        value = values[ch]
        total += -value if nxt != " " and values[nxt] > value else value
    return total
''',
        tests='''
assert roman_to_int("I") == 1
assert roman_to_int("IV") == 4
assert roman_to_int("IX") == 9
assert roman_to_int("LVIII") == 58
assert roman_to_int("CDXLIV") == 444
assert roman_to_int("MMMCMXCIX") == 3999
assert roman_to_int("MMXXV") == 2025
''',
    ),
    Problem(
        name="int_to_roman",
        signature="int_to_roman(number: int) -> str",
        difficulty=2,
        behaviour="Write an integer from 1 to 3999 as a Roman numeral in upper case, using the subtractive "
                  "forms IV, IX, XL, XC, CD and CM. Raise ValueError for numbers outside that range.",
        examples=("int_to_roman(1987)", "int_to_roman(4)"),
        solution='''
def int_to_roman(number: int) -> str:
    if not 1 <= number <= 3999:
        raise ValueError("only 1 to 3999 can be written")
    out = []
    for value, symbol in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                          (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        count, number = divmod(number, value)
        out.append(symbol * count)
    return "".join(out)
''',
        tests='''
assert int_to_roman(1) == "I"
assert int_to_roman(9) == "IX"
assert int_to_roman(14) == "XIV"
assert int_to_roman(444) == "CDXLIV"
assert int_to_roman(3999) == "MMMCMXCIX"
assert int_to_roman(2024) == "MMXXIV"
def test_out_of_range_raises():
    for bad in [0, -1, 4000]:
        try:
            int_to_roman(bad)
        except ValueError:
            continue
        raise AssertionError(f"int_to_roman({bad}) did not raise ValueError")
''',
    ),
    Problem(
        name="next_palindrome",
        signature="next_palindrome(n: int) -> int",
        difficulty=2,
        behaviour="Return the smallest palindromic number strictly greater than the non-negative integer "
                  "`n` (a number whose decimal digits read the same both ways). It must be fast for n up "
                  "to 10**15.",
        examples=("next_palindrome(123)", "next_palindrome(99)"),
        solution='''
def next_palindrome(n: int) -> int:
    digits = str(n + 1)
    length = len(digits)
    half = digits[:(length + 1) // 2]
    candidate = int(half + half[:length // 2][::-1])
    if candidate > n:
        return candidate
    half = str(int(half) + 1)
    if len(half) > (length + 1) // 2:  # 99..9 + 1: the next length up
        return 10 ** length + 1
    return int(half + half[:length // 2][::-1])
''',
        tests='''
assert next_palindrome(0) == 1
assert next_palindrome(8) == 9
assert next_palindrome(9) == 11
assert next_palindrome(10) == 11
assert next_palindrome(11) == 22
assert next_palindrome(808) == 818
assert next_palindrome(1991) == 2002
assert next_palindrome(999) == 1001
assert next_palindrome(123456789012345) == 123456797654321
''',
    ),
    Problem(
        name="version_compare",
        signature="version_compare(a: str, b: str) -> int",
        difficulty=2,
        behaviour="Compare two version strings made of non-negative integers separated by dots, number by "
                  "number (so '1.10' is newer than '1.9'). Missing trailing numbers count as 0, so '1.0' "
                  "equals '1'. Return -1 if `a` is older, 1 if it is newer, 0 if they are equal.",
        examples=('version_compare("1.2.10", "1.2.9")', 'version_compare("2.0", "2")'),
        solution='''
def version_compare(a: str, b: str) -> int:
    x = [int(part) for part in a.split(".")]
    y = [int(part) for part in b.split(".")]
    length = max(len(x), len(y))
    x += [0] * (length - len(x))
    y += [0] * (length - len(y))
    return (x > y) - (x < y)
''',
        tests='''
assert version_compare("1", "1") == 0
assert version_compare("1.0.0", "1") == 0
assert version_compare("1.9", "1.10") == -1
assert version_compare("3.0", "2.99.99") == 1
assert version_compare("1.0.1", "1") == 1
assert version_compare("0.0.1", "0.1") == -1
''',
    ),
    Problem(
        name="parse_query",
        signature="parse_query(query: str) -> dict[str, list[str]]",
        difficulty=2,
        behaviour="Parse a URL query string such as 'a=1&b=2&a=3' into a dict mapping each key to the list "
                  "of its values in order. A part without '=' has the value ''. Empty parts (from '&&' or "
                  "a trailing '&') are skipped. Values are taken literally: no percent-decoding.",
        examples=('parse_query("tag=red&size=m&tag=blue")', 'parse_query("debug&x=")'),
        solution='''
def parse_query(query: str) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        result.setdefault(key, []).append(value)
    return result
''',
        tests='''
assert parse_query("") == {}
assert parse_query("a=1") == {"a": ["1"]}
assert parse_query("a=1&a=2&b=3") == {"a": ["1", "2"], "b": ["3"]}
assert parse_query("flag") == {"flag": [""]}
assert parse_query("x=1&&y=2&") == {"x": ["1"], "y": ["2"]}
assert parse_query("eq=a=b") == {"eq": ["a=b"]}
assert parse_query("q=a%20b") == {"q": ["a%20b"]}
''',
    ),
    Problem(
        name="longest_increasing_run",
        signature="longest_increasing_run(numbers: list[int]) -> int",
        difficulty=2,
        behaviour="Return the length of the longest run of consecutive elements of `numbers` in which each "
                  "element is strictly greater than the one before it. An empty list has 0; a single "
                  "element is a run of 1.",
        examples=("longest_increasing_run([1, 2, 2, 3, 4, 5, 1])", "longest_increasing_run([5, 4, 3])"),
        solution='''
def longest_increasing_run(numbers: list[int]) -> int:
    best = run = 0
    previous = None
    for n in numbers:
        run = run + 1 if previous is not None and n > previous else 1
        best = max(best, run)
        previous = n
    return best
''',
        tests='''
assert longest_increasing_run([]) == 0
assert longest_increasing_run([7]) == 1
assert longest_increasing_run([1, 1, 1]) == 1
assert longest_increasing_run([1, 2, 3]) == 3
assert longest_increasing_run([3, 1, 2, 3, 0, 1]) == 3
assert longest_increasing_run([-5, -4, -4, -3, -2, -1]) == 4
''',
    ),
    Problem(
        name="primes_below",
        signature="primes_below(n: int) -> list[int]",
        difficulty=2,
        behaviour="Return every prime number less than `n`, in ascending order. It must handle n up to one "
                  "million in well under a second (a sieve does).",
        examples=("primes_below(20)", "primes_below(2)"),
        solution='''
def primes_below(n: int) -> list[int]:
    if n < 3:
        return []
    sieve = bytearray([1]) * n
    sieve[0] = sieve[1] = 0
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(range(i * i, n, i)))
    return [i for i in range(n) if sieve[i]]
''',
        tests='''
assert primes_below(0) == []
assert primes_below(2) == []
assert primes_below(3) == [2]
assert primes_below(30) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
assert len(primes_below(1_000_000)) == 78498
assert primes_below(1_000_000)[-1] == 999983
''',
    ),
    # --- difficulty 3 ---------------------------------------------------------------------
    Problem(
        name="to_snake_case",
        signature="to_snake_case(name: str) -> str",
        difficulty=3,
        behaviour="Convert a camelCase or PascalCase identifier to snake_case. A new word starts at an "
                  "upper-case letter that follows a lower-case letter or digit, and at the last capital of "
                  "a run of capitals that is followed by a lower-case letter (so 'parseHTTPResponse' "
                  "becomes 'parse_http_response'). Digits stay attached to the word before them.",
        examples=('to_snake_case("parseHTTPResponse")', 'to_snake_case("Version2Update")'),
        solution='''
import re


def to_snake_case(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\\1_\\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", name)
    return name.lower()
''',
        tests='''
assert to_snake_case("") == ""
assert to_snake_case("word") == "word"
assert to_snake_case("camelCase") == "camel_case"
assert to_snake_case("PascalCaseName") == "pascal_case_name"
assert to_snake_case("HTTPServer") == "http_server"
assert to_snake_case("getURL") == "get_url"
assert to_snake_case("utf8Decoder") == "utf8_decoder"
assert to_snake_case("ABC") == "abc"
''',
    ),
    Problem(
        name="spiral_order",
        signature="spiral_order(matrix: list[list[int]]) -> list[int]",
        difficulty=3,
        behaviour="Return the elements of a rectangular matrix in clockwise spiral order: along the top row "
                  "left to right, down the right column, along the bottom row right to left, up the left "
                  "column, then the same for the inner matrix, until every element is visited once.",
        examples=("spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]])", "spiral_order([[1, 2], [3, 4], [5, 6]])"),
        solution='''
def spiral_order(matrix: list[list[int]]) -> list[int]:
    out = []
    rows = [list(row) for row in matrix]
    while rows:
        out.extend(rows.pop(0))
        rows = [list(row) for row in zip(*rows)][::-1]  # turn the rest counter-clockwise
    return out
''',
        tests='''
assert spiral_order([]) == []
assert spiral_order([[1]]) == [1]
assert spiral_order([[1, 2, 3]]) == [1, 2, 3]
assert spiral_order([[1], [2], [3]]) == [1, 2, 3]
assert spiral_order([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]) == [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7]
assert spiral_order([[1, 2], [3, 4]]) == [1, 2, 4, 3]
assert sorted(spiral_order([[r * 5 + c for c in range(5)] for r in range(4)])) == list(range(20))
''',
    ),
    Problem(
        name="merge_intervals",
        signature="merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]",
        difficulty=3,
        behaviour="Merge overlapping closed intervals (start, end), with start <= end, given in any order. "
                  "Intervals that overlap or touch (one ends where the next starts) become one. Return the "
                  "merged intervals as tuples sorted by start.",
        examples=("merge_intervals([(8, 10), (1, 3), (2, 6)])", "merge_intervals([(1, 2), (2, 3)])"),
        solution='''
def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
''',
        tests='''
assert merge_intervals([]) == []
assert merge_intervals([(5, 5)]) == [(5, 5)]
assert merge_intervals([(1, 4), (4, 5)]) == [(1, 5)]
assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]
assert merge_intervals([(6, 8), (1, 2), (3, 4)]) == [(1, 2), (3, 4), (6, 8)]
assert merge_intervals([(-3, 0), (-1, 2), (5, 7), (6, 6)]) == [(-3, 2), (5, 7)]
''',
    ),
    Problem(
        name="wrap_text",
        signature="wrap_text(text: str, width: int) -> list[str]",
        difficulty=3,
        behaviour="Break `text` into lines of at most `width` characters, filling each line greedily with "
                  "as many whole words as fit, separated by single spaces. Words are separated by any "
                  "whitespace in `text`. A word longer than `width` goes on a line of its own, unbroken. "
                  "Text with no words gives an empty list. Do not use the textwrap module.",
        examples=('wrap_text("the quick brown fox jumps over the lazy dog", 10)', 'wrap_text("a extraordinary b", 5)'),
        solution='''
def wrap_text(text: str, width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines
''',
        tests='''
assert wrap_text("", 10) == []
assert wrap_text("   ", 10) == []
assert wrap_text("one", 10) == ["one"]
assert wrap_text("aa bb cc", 5) == ["aa bb", "cc"]
assert wrap_text("aa bb cc", 4) == ["aa", "bb", "cc"]
assert wrap_text("x  y\\n z", 80) == ["x y z"]
assert wrap_text("tiny enormousword end", 6) == ["tiny", "enormousword", "end"]
''',
    ),
    Problem(
        name="edit_distance",
        signature="edit_distance(a: str, b: str) -> int",
        difficulty=3,
        behaviour="Return the smallest number of single-character insertions, deletions and substitutions "
                  "that turn `a` into `b` (the Levenshtein distance). Strings of a few hundred characters "
                  "must take well under a second.",
        examples=('edit_distance("kitten", "sitting")', 'edit_distance("", "abc")'),
        solution='''
def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
''',
        tests='''
assert edit_distance("", "") == 0
assert edit_distance("same", "same") == 0
assert edit_distance("abc", "") == 3
assert edit_distance("flaw", "lawn") == 2
assert edit_distance("intention", "execution") == 5
assert edit_distance("ab", "ba") == 2
assert edit_distance("a" * 300, "b" * 300) == 300
''',
    ),
    Problem(
        name="topological_order",
        signature="topological_order(dependencies: dict[str, list[str]]) -> list[str]",
        difficulty=3,
        behaviour="`dependencies` maps each task to the tasks that must come before it; tasks named only in "
                  "the lists are tasks too. Return every task once, each after all of its dependencies. "
                  "When several tasks are ready at the same time, take them in alphabetical order. Raise "
                  "ValueError if the dependencies form a cycle.",
        examples=('topological_order({"deploy": ["build", "test"], "test": ["build"]})',),
        solution='''
import heapq


def topological_order(dependencies: dict[str, list[str]]) -> list[str]:
    tasks = set(dependencies)
    for before in dependencies.values():
        tasks.update(before)
    waiting = {task: set(dependencies.get(task, ())) for task in tasks}
    ready = [task for task, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for other, deps in waiting.items():
            if task in deps:
                deps.remove(task)
                if not deps:
                    heapq.heappush(ready, other)
    if len(order) != len(tasks):
        raise ValueError("the dependencies form a cycle")
    return order
''',
        tests='''
assert topological_order({}) == []
assert topological_order({"a": []}) == ["a"]
assert topological_order({"b": ["a"]}) == ["a", "b"]
assert topological_order({"c": [], "b": [], "a": []}) == ["a", "b", "c"]
assert topological_order({"z": ["y"], "y": ["x"], "a": ["y"]}) == ["x", "y", "a", "z"]
def test_cycle_raises():
    try:
        topological_order({"a": ["b"], "b": ["c"], "c": ["a"]})
    except ValueError:
        return
    raise AssertionError("a cycle did not raise ValueError")
''',
    ),
    Problem(
        name="count_islands",
        signature="count_islands(grid: list[str]) -> int",
        difficulty=3,
        behaviour="`grid` is a map given as equal-length strings of '#' (land) and '.' (water). Return how "
                  "many islands it has: groups of land cells connected up, down, left or right (not "
                  "diagonally). Grids can be 200 by 200, so avoid deep recursion.",
        examples=('count_islands(["##..", "#..#", "...#"])',),
        solution='''
def count_islands(grid: list[str]) -> int:
    seen = set()
    islands = 0
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell != "#" or (r, c) in seen:
                continue
            islands += 1
            seen.add((r, c))
            stack = [(r, c)]
            while stack:
                y, x = stack.pop()
                for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                    if 0 <= ny < len(grid) and 0 <= nx < len(grid[ny]) and grid[ny][nx] == "#" \\
                            and (ny, nx) not in seen:
                        seen.add((ny, nx))
                        stack.append((ny, nx))
    return islands
''',
        tests='''
assert count_islands([]) == 0
assert count_islands(["...", "..."]) == 0
assert count_islands(["#"]) == 1
assert count_islands(["#.#", ".#.", "#.#"]) == 5
assert count_islands(["###", "#.#", "###"]) == 1
assert count_islands(["#" * 200] * 200) == 1
assert count_islands(["#." * 100] * 200) == 100
''',
    ),
    Problem(
        name="fewest_coins",
        signature="fewest_coins(amount: int, coins: list[int]) -> int",
        difficulty=3,
        behaviour="Return the fewest coins that add up to exactly `amount`, using any number of coins of "
                  "each value in `coins` (positive integers). Return 0 for an amount of 0 and -1 if the "
                  "amount cannot be made. Greedy choice is not always right: with coins [1, 3, 4], 6 is "
                  "3 + 3.",
        examples=("fewest_coins(11, [1, 2, 5])", "fewest_coins(3, [2])"),
        solution='''
def fewest_coins(amount: int, coins: list[int]) -> int:
    best = [0] + [-1] * amount
    for total in range(1, amount + 1):
        options = [best[total - c] for c in coins if c <= total and best[total - c] >= 0]
        best[total] = min(options) + 1 if options else -1
    return best[amount]
''',
        tests='''
assert fewest_coins(0, [1, 2]) == 0
assert fewest_coins(0, []) == 0
assert fewest_coins(7, []) == -1
assert fewest_coins(6, [1, 3, 4]) == 2
assert fewest_coins(3, [2]) == -1
assert fewest_coins(100, [1, 5, 10, 25]) == 4
assert fewest_coins(9999, [7, 13]) == 771
''',
    ),
    Problem(
        name="normalize_path",
        signature="normalize_path(path: str) -> str",
        difficulty=3,
        behaviour="Simplify a relative, '/'-separated path: drop empty and '.' segments, and let each '..' "
                  "remove the segment before it. A '..' with nothing before it to remove is kept (the path "
                  "then starts with it). The result has no leading or trailing '/', and is '.' if nothing "
                  "is left. Do not use os.path or pathlib.",
        examples=('normalize_path("a/./b/../c/")', 'normalize_path("../x/../../y")'),
        solution='''
def normalize_path(path: str) -> str:
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(segment)
    return "/".join(parts) or "."
''',
        tests='''
assert normalize_path("") == "."
assert normalize_path(".") == "."
assert normalize_path("a//b") == "a/b"
assert normalize_path("a/b/..") == "a"
assert normalize_path("a/..") == "."
assert normalize_path("../../a") == "../../a"
assert normalize_path("a/../../b/./c/") == "../b/c"
assert normalize_path("x/y/../z/./w/..") == "x/z"
''',
    ),
    Problem(
        name="matrix_multiply",
        signature="matrix_multiply(a: list[list[int]], b: list[list[int]]) -> list[list[int]]",
        difficulty=3,
        behaviour="Return the matrix product of `a` (n by m) and `b` (m by p), both given as lists of rows. "
                  "Raise ValueError if the number of columns of `a` differs from the number of rows of `b`.",
        examples=("matrix_multiply([[1, 2], [3, 4]], [[5], [6]])",),
        solution='''
def matrix_multiply(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    if any(len(row) != len(b) for row in a):
        raise ValueError("columns of a must equal rows of b")
    columns = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, column)) for column in columns] for row in a]
''',
        tests='''
assert matrix_multiply([[2]], [[3]]) == [[6]]
assert matrix_multiply([[1, 0], [0, 1]], [[4, 5], [6, 7]]) == [[4, 5], [6, 7]]
assert matrix_multiply([[1, 2, 3]], [[1], [2], [3]]) == [[14]]
assert matrix_multiply([[1], [2]], [[3, 4]]) == [[3, 4], [6, 8]]
assert matrix_multiply([[1, -1], [2, 0]], [[0, 1], [1, 1]]) == [[-1, 0], [0, 2]]
def test_shape_mismatch_raises():
    try:
        matrix_multiply([[1, 2]], [[1, 2]])
    except ValueError:
        return
    raise AssertionError("a 1x2 times a 1x2 matrix did not raise ValueError")
''',
    ),
    Problem(
        name="anagram_groups",
        signature="anagram_groups(words: list[str]) -> list[list[str]]",
        difficulty=3,
        behaviour="Group `words` that are anagrams of each other (the same letters, case-insensitively, in "
                  "any order). Each group lists its words in their original order; groups are ordered by "
                  "the position of their first word in `words`. Words that have no anagram form groups of one.",
        examples=('anagram_groups(["listen", "google", "Silent", "enlist", "gogole", "cat"])',),
        solution='''
def anagram_groups(words: list[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault("".join(sorted(word.lower())), []).append(word)
    return list(groups.values())
''',
        tests='''
assert anagram_groups([]) == []
assert anagram_groups(["a"]) == [["a"]]
assert anagram_groups(["ab", "ba", "ab"]) == [["ab", "ba", "ab"]]
assert anagram_groups(["rat", "tar", "art", "star"]) == [["rat", "tar", "art"], ["star"]]
assert anagram_groups(["Dusty", "study", "night", "Thing"]) == [["Dusty", "study"], ["night", "Thing"]]
assert anagram_groups(["abc", "abcd", "dcba"]) == [["abc"], ["abcd", "dcba"]]
''',
    ),
    Problem(
        name="bank_balances",
        signature="bank_balances(transfers: list[tuple[str, str, int]]) -> dict[str, int]",
        difficulty=3,
        behaviour="Each transfer (sender, receiver, amount) moves `amount` from sender to receiver; "
                  "everyone starts at 0 and balances may go negative. Return the final balance of every "
                  "person who took part, leaving out those whose balance ends at exactly 0. A transfer to "
                  "oneself changes nothing. Raise ValueError for an amount that is not positive.",
        examples=('bank_balances([("ann", "bo", 30), ("bo", "cy", 10), ("cy", "ann", 10)])',),
        solution='''
def bank_balances(transfers: list[tuple[str, str, int]]) -> dict[str, int]:
    balances: dict[str, int] = {}
    for sender, receiver, amount in transfers:
        if amount <= 0:
            raise ValueError(f"amounts must be positive, got {amount}")
        balances[sender] = balances.get(sender, 0) - amount
        balances[receiver] = balances.get(receiver, 0) + amount
    return {person: balance for person, balance in balances.items() if balance != 0}
''',
        tests='''
assert bank_balances([]) == {}
assert bank_balances([("a", "b", 5)]) == {"a": -5, "b": 5}
assert bank_balances([("a", "b", 5), ("b", "a", 5)]) == {}
assert bank_balances([("a", "a", 9)]) == {}
assert bank_balances([("a", "b", 3), ("b", "c", 3)]) == {"a": -3, "c": 3}
def test_non_positive_amount_raises():
    for amount in [0, -4]:
        try:
            bank_balances([("a", "b", amount)])
        except ValueError:
            continue
        raise AssertionError(f"amount {amount} did not raise ValueError")
''',
    ),
    Problem(
        name="kth_smallest_pair_sum",
        signature="kth_smallest_pair_sum(a: list[int], b: list[int], k: int) -> int",
        difficulty=3,
        behaviour="Among all sums a[i] + b[j] (one element from each list, every pair of positions counted "
                  "separately), return the k-th smallest, counting from k = 1. Both lists are sorted "
                  "ascending and may each hold up to 10,000 numbers, so do not build all the sums; "
                  "1 <= k <= len(a) * len(b).",
        examples=("kth_smallest_pair_sum([1, 7, 11], [2, 4, 6], 3)",),
        solution='''
def kth_smallest_pair_sum(a: list[int], b: list[int], k: int) -> int:
    def count_at_most(limit: int) -> int:
        """How many pairs sum to at most ``limit`` (two pointers, one pass)."""
        count, j = 0, len(b) - 1
        for x in a:
            while j >= 0 and x + b[j] > limit:
                j -= 1
            count += j + 1
        return count

    # Binary search on the sum itself: the answer is the least s with count_at_most(s) >= k.
    low, high = a[0] + b[0], a[-1] + b[-1]
    while low < high:
        middle = (low + high) // 2
        if count_at_most(middle) >= k:
            high = middle
        else:
            low = middle + 1
    return low
''',
        tests='''
assert kth_smallest_pair_sum([1], [1], 1) == 2
assert kth_smallest_pair_sum([1, 7, 11], [2, 4, 6], 1) == 3
assert kth_smallest_pair_sum([1, 7, 11], [2, 4, 6], 3) == 7
assert kth_smallest_pair_sum([1, 7, 11], [2, 4, 6], 9) == 17
assert kth_smallest_pair_sum([1, 1, 2], [1, 2, 3], 2) == 2
assert kth_smallest_pair_sum([-3, 0], [-2, 5], 4) == 5
assert kth_smallest_pair_sum(list(range(10000)), list(range(10000)), 10) == 3
assert kth_smallest_pair_sum(list(range(10000)), list(range(10000)), 100_000_000) == 19998
''',
    ),
)
