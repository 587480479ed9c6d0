#!/usr/bin/env python3
"""Write the task files and tests of ``envhub-examples/terminal-tasks``.

    python generate.py                   # rewrite tasks/*.jsonl and tests/<id>/
    python generate.py --out /tmp/tt     # somewhere else (tasks/ and tests/ under it)

Standard library only, deterministic: the same script always writes the same bytes, so the
``rows`` and ``sha256`` recorded in ``envhub.toml`` can be checked by ``envhub validate``
after regenerating.

Every task is written here by hand: the files the workspace starts with (the ``files`` field),
the instruction (``prompt``), a reference solution as a list of shell commands (``solution``),
a difficulty from 1 to 3 and its tests: a ``run-tests.sh`` that prints one ``PASS name`` or
``FAIL name`` line per check, with any files it compares against. The tests of a public
task are a directory, ``tests/<id>/``, named by the ``tests`` field; the tests of a held-out
task travel inline in its row (``tests`` is then ``{file name: text}``), so they stay in the
held-out store with the rest of the task and nothing public gives them away. This script is
left out of the published archive (``.envhubignore``) for the same reason.

The tests may use only what the host system offers inside the sandbox: bash, coreutils, sed,
grep, find, make, jq and python3 with its standard library (no awk: it is reached through
/etc/alternatives, which the sandbox does not show; no site-packages).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# The shared head of every run-tests.sh: `check NAME COMMAND...` runs COMMAND in the
# workspace (the current directory) and prints PASS or FAIL; T is the tests' own directory.
PRELUDE = """\
#!/bin/bash
# Tests of task {id}. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {{
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}}
"""


def run_tests(task_id: str, body: str) -> str:
    return PRELUDE.format(id=task_id) + body.lstrip("\n")


# --------------------------------------------------------------------------- tasks

def organise_inbox() -> dict[str, Any]:
    files = {
        "inbox/report.txt": "Quarterly report: sales up 4%.\n",
        "inbox/notes.txt": "Call the printer on Monday.\n",
        "inbox/sales.csv": "month,amount\njan,120\nfeb,135\n",
        "inbox/stock.csv": "item,count\npens,40\npads,12\n",
        "inbox/server.log": "10:00 started\n10:05 stopped\n",
        "inbox/README": "Drop new files here.\n",
    }
    tests = run_tests("organise-inbox", """
check text-files-moved test -f text/report.txt -a -f text/notes.txt
check csv-files-moved test -f data/sales.csv -a -f data/stock.csv
check log-files-moved test -f logs/server.log
check others-stay test -f inbox/README
check inbox-sorted bash -c '! ls inbox | grep -qE "\\.(txt|csv|log)$"'
check contents-kept bash -c 'grep -qx "Quarterly report: sales up 4%." text/report.txt \
&& grep -qx "pads,12" data/stock.csv'
""")
    return {
        "id": "organise-inbox", "difficulty": 1, "files": files,
        "prompt": "The folder inbox/ holds files of several kinds. Move every .txt file into a folder text/, "
                  "every .csv file into data/ and every .log file into logs/ (make these folders at the top "
                  "of the workspace). Leave any other file in inbox/, and do not change the files' contents.",
        "solution": ["mkdir -p text data logs",
                     "mv inbox/*.txt text/ && mv inbox/*.csv data/ && mv inbox/*.log logs/"],
        "tests": {"run-tests.sh": tests},
    }


APP_LOG = """\
2024-05-01T10:00:01 INFO started worker 1
2024-05-01T10:00:02 INFO started worker 2
2024-05-01T10:01:17 ERROR disk quota exceeded on /var/data
2024-05-01T10:01:18 WARN retrying write to /var/data
2024-05-01T10:02:40 INFO recovered after ERROR in worker 2
2024-05-01T10:03:05 ERROR connection reset by peer 10.0.0.7
2024-05-01T10:04:00 INFO ERROR count is now 2
2024-05-01T10:05:12 ERROR worker 1 exited with status 137
2024-05-01T10:06:00 INFO shutting down
"""


def extract_errors() -> dict[str, Any]:
    expected = "".join(line.split(" ", 2)[2] + "\n" for line in APP_LOG.splitlines() if line.split(" ")[1] == "ERROR")
    tests = run_tests("extract-errors", """
check file-written test -f errors.txt
check error-messages diff "$T/expected.txt" errors.txt
check info-lines-left-out bash -c '! grep -q "recovered after" errors.txt'
check log-unchanged diff "$T/app.log" logs/app.log
""")
    return {
        "id": "extract-errors", "difficulty": 1, "files": {"logs/app.log": APP_LOG},
        "prompt": "logs/app.log has one event per line: a timestamp, a level (INFO, WARN or ERROR) and a message. "
                  "Write errors.txt at the top of the workspace with the message of every ERROR event (the text "
                  "after the level, without the timestamp or the level), one per line, in the order they appear.",
        "solution": ["grep -E '^[^ ]+ ERROR ' logs/app.log | sed -E 's/^[^ ]+ ERROR //' > errors.txt"],
        "tests": {"run-tests.sh": tests, "expected.txt": expected, "app.log": APP_LOG},
    }


def fix_permissions() -> dict[str, Any]:
    files = {
        "scripts/build.sh": "#!/bin/sh\necho building\n",
        "scripts/deploy.sh": "#!/bin/sh\necho deploying\n",
        "scripts/README.md": "Run build.sh, then deploy.sh.\n",
        "secrets/api.key": "k-3f9a1c77e2\n",
    }
    tests = run_tests("fix-permissions", """
mode() { stat -c %a "$1"; }
check build-executable test "$(mode scripts/build.sh)" = 755
check deploy-executable test "$(mode scripts/deploy.sh)" = 755
check key-private test "$(mode secrets/api.key)" = 600
check readme-not-executable bash -c '[[ $(stat -c %a scripts/README.md) != *[1357]* ]]'
check scripts-run bash -c 'test "$(./scripts/build.sh)" = building'
""")
    return {
        "id": "fix-permissions", "difficulty": 1, "files": files,
        "prompt": "Make every .sh file in scripts/ executable by everyone and writable only by its owner "
                  "(mode 755), and make secrets/api.key readable and writable by its owner only (mode 600). "
                  "scripts/README.md must not become executable.",
        "solution": ["chmod 755 scripts/*.sh", "chmod 600 secrets/api.key"],
        "tests": {"run-tests.sh": tests},
    }


ACCESS_LOG_ROWS = [
    ("10.0.0.1", "GET /index.html", 200, 5120), ("10.0.0.2", "GET /missing", 404, 310),
    ("10.0.0.1", "GET /style.css", 200, 880), ("10.0.0.3", "POST /login", 302, 0),
    ("10.0.0.4", "GET /admin", 403, 120), ("10.0.0.2", "GET /old", 404, 310),
    ("10.0.0.5", "GET /index.html", 200, 5120), ("10.0.0.6", "GET /api/items", 500, 64),
    ("10.0.0.3", "GET /account", 200, 2048), ("10.0.0.7", "GET /favicon.ico", 404, 310),
    ("10.0.0.8", "POST /login", 302, 0), ("10.0.0.9", "GET /api/items", 500, 64),
    ("10.0.0.1", "GET /about", 200, 1900),
]


def status_counts() -> dict[str, Any]:
    log = "".join(
        f'{ip} - - [01/May/2024:10:{i:02d}:00 +0000] "{request} HTTP/1.1" {status} {size if size else "-"}\n'
        for i, (ip, request, status, size) in enumerate(ACCESS_LOG_ROWS))
    counts: dict[int, int] = {}
    for _, _, status, _ in ACCESS_LOG_ROWS:
        counts[status] = counts.get(status, 0) + 1
    expected = "".join(f"{code} {n}\n" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    tests = run_tests("status-counts", """
check file-written test -f status_counts.txt
check every-code-counted bash -c 'test "$(cut -d" " -f1 status_counts.txt | sort)" \
= "$(cut -d" " -f1 "$T/expected.txt" | sort)"'
check counts-and-order diff "$T/expected.txt" status_counts.txt
""")
    return {
        "id": "status-counts", "difficulty": 2, "files": {"logs/access.log": log},
        "prompt": "logs/access.log is a web server's access log, one request per line; the status code is the "
                  "second-to-last field. Write status_counts.txt with one line per status code, `CODE COUNT` "
                  "(for example `200 5`), sorted by count, largest first, and codes with equal counts in "
                  "ascending order.",
        "solution": ["sed -E 's/.* ([0-9]{3}) [0-9-]+$/\\1/' logs/access.log | sort | uniq -c "
                     "| sed -E 's/^ *([0-9]+) (.*)$/\\2 \\1/' | sort -k2,2nr -k1,1n > status_counts.txt"],
        "tests": {"run-tests.sh": tests, "expected.txt": expected},
    }


BACKUP_BUGGY = """\
#!/bin/bash
# Copy every file of the directory given as $1 into backups/<the directory's name>/.
set -e
src=$1
dest=backups/$(basename $src)
mkdir -p $dest
for f in $src/*; do
    cp $f $dest/
done
echo "backed up $(ls $dest | wc -l) files"
"""

BACKUP_FIXED = """\
#!/bin/bash
# Copy every file of the directory given as $1 into backups/<the directory's name>/.
set -e
src=$1
dest="backups/$(basename "$src")"
mkdir -p "$dest"
for f in "$src"/*; do
    cp "$f" "$dest/"
done
echo "backed up $(ls "$dest" | wc -l) files"
"""


def fix_backup_script() -> dict[str, Any]:
    files = {
        "backup.sh": BACKUP_BUGGY,
        "my documents/letter one.txt": "Dear Ana,\n",
        "my documents/plan.txt": "1. pack\n2. travel\n",
        "photos/cat.txt": "a cat\n",
    }
    tests = run_tests("fix-backup-script", """
check documents-backed-up test -f "backups/my documents/letter one.txt" -a -f "backups/my documents/plan.txt"
check copies-equal diff "my documents/letter one.txt" "backups/my documents/letter one.txt"
try_script() {
    mkdir -p "/tmp/check dir/x" && printf 'one\\n' > "/tmp/check dir/a b.txt" \
&& printf 'two\\n' > "/tmp/check dir/c.txt"
    rm -rf "backups/check dir"
    bash backup.sh "/tmp/check dir" 2>/dev/null
    test "$(cat "backups/check dir/a b.txt")" = one && test "$(cat "backups/check dir/c.txt")" = two
}
check script-handles-spaces try_script
check plain-names-still-work bash -c 'rm -rf backups/photos && bash backup.sh photos && test -f backups/photos/cat.txt'
""")
    return {
        "id": "fix-backup-script", "difficulty": 2, "files": files,
        "prompt": "backup.sh copies the files of a directory into backups/<directory name>/. Run as "
                  "`bash backup.sh \"my documents\"` it fails. Fix the script so that it works for directory "
                  "and file names with spaces in them, then run it that way to back up \"my documents\".",
        "solution": ["cat > backup.sh <<'EOF'\n" + BACKUP_FIXED + "EOF", "bash backup.sh \"my documents\""],
        "tests": {"run-tests.sh": tests},
    }


TOTAL_PY = '''\
"""Print the sum of one column of a CSV file: python3 total.py FILE COLUMN"""
import csv
import sys


def total(path, column):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    index = rows[0].index(column)
    return sum(float(row[index]) for row in rows[2:])


if __name__ == "__main__":
    print(f"{total(sys.argv[1], sys.argv[2]):.2f}")
'''

SALES_CSV = "date,item,amount\n2024-05-01,pens,12.50\n2024-05-01,pads,7.25\n2024-05-02,ink,30.00\n" \
            "2024-05-03,pens,12.50\n2024-05-04,paper,4.75\n"


def fix_csv_total() -> dict[str, Any]:
    amounts = [float(r["amount"]) for r in csv.DictReader(io.StringIO(SALES_CSV))]
    expected = f"{sum(amounts):.2f}\n"
    check_csv = "name,price,count\nA,1.5,2\nB,2.25,3\nC,10,1\n"
    tests = run_tests("fix-csv-total", """
check total-written test "$(cat total.txt)" = "$(cat "$T/expected.txt")"
check script-fixed test "$(python3 total.py data/sales.csv amount)" = "$(cat "$T/expected.txt")"
check other-file-and-column test "$(python3 total.py "$T/check.csv" count)" = 6.00
""")
    return {
        "id": "fix-csv-total", "difficulty": 2, "files": {"total.py": TOTAL_PY, "data/sales.csv": SALES_CSV},
        "prompt": "`python3 total.py data/sales.csv amount` should print the sum of the amount column with two "
                  "decimals, but the result is too small. Fix total.py (keep how it is run), then write the "
                  "correct total of data/sales.csv's amount column into total.txt.",
        "solution": ["sed -i 's/rows\\[2:\\]/rows[1:]/' total.py",
                     "python3 total.py data/sales.csv amount > total.txt"],
        "tests": {"run-tests.sh": tests, "expected.txt": expected, "check.csv": check_csv},
    }


WORDSTATS_CORE_BUGGY = '''\
"""Word statistics of a text."""

PUNCTUATION = ".,;:!?\\"'()"


def words(text):
    """The words of ``text``, lower case, without surrounding punctuation."""
    return [w.strip(PUNCTUATION).lower() for w in text.split(" ") if w.strip(PUNCTUATION)]


def word_count(text):
    return len(words(text))


def top_words(text, n):
    """The ``n`` most frequent words with their counts, most frequent first; ties alphabetical."""
    counts = {}
    for w in words(text):
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[:n]
'''

WORDSTATS_CORE_FIXED = WORDSTATS_CORE_BUGGY.replace('text.split(" ")', "text.split()").replace(
    "key=lambda kv: kv[1], reverse=True", "key=lambda kv: (-kv[1], kv[0])")

WORDSTATS_TESTS = '''\
import unittest

from wordstats import top_words, word_count


class WordCountTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(word_count("one two three"), 3)

    def test_lines_and_tabs(self):
        self.assertEqual(word_count("one\\ntwo\\tthree  four"), 4)

    def test_punctuation(self):
        self.assertEqual(word_count("Hello, world! (again)"), 3)


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_ties_alphabetical(self):
        self.assertEqual(top_words("pear apple fig", 3), [("apple", 1), ("fig", 1), ("pear", 1)])


if __name__ == "__main__":
    unittest.main()
'''

WORDSTATS_HIDDEN = '''\
"""Hidden checks of wordstats, run with the workspace on sys.path; prints PASS/FAIL lines."""
import sys

sys.path.insert(0, ".")


def check(name, fn):
    try:
        ok = fn()
    except Exception:
        ok = False
    print(("PASS " if ok else "FAIL ") + name)


def run():
    from wordstats import top_words, word_count
    check("hidden-newlines", lambda: word_count("a\\nb\\n\\nc") == 3)
    check("hidden-ties", lambda: top_words("z y x z y x w", 3) == [("x", 2), ("y", 2), ("z", 2)])
    check("hidden-case", lambda: top_words("The the THE cat", 1) == [("the", 3)])


try:
    run()
except Exception:
    for name in ("hidden-newlines", "hidden-ties", "hidden-case"):
        print("FAIL " + name)
'''


def fix_failing_tests() -> dict[str, Any]:
    files = {
        "wordstats/__init__.py": "from wordstats.core import top_words, word_count\n\n"
                                 "__all__ = [\"top_words\", \"word_count\"]\n",
        "wordstats/core.py": WORDSTATS_CORE_BUGGY,
        "test_wordstats.py": WORDSTATS_TESTS,
        "README.md": "wordstats: word statistics. Run the tests with `python3 -m unittest -v`.\n",
    }
    tests = run_tests("fix-failing-tests", """
check suite-passes python3 -m unittest -q test_wordstats
check tests-unchanged diff "$T/test_wordstats.py" test_wordstats.py
python3 "$T/hidden.py"
""")
    return {
        "id": "fix-failing-tests", "difficulty": 3, "files": files,
        "prompt": "This small Python package's test suite fails: run `python3 -m unittest -v` in the workspace "
                  "to see it. Fix the bugs in wordstats/core.py so that every test passes. Do not change the tests.",
        "solution": ["python3 -m unittest -q 2>&1 | tail -n 3",
                     "cat > wordstats/core.py <<'EOF'\n" + WORDSTATS_CORE_FIXED + "EOF",
                     "python3 -m unittest -q"],
        "tests": {"run-tests.sh": tests, "test_wordstats.py": WORDSTATS_TESTS, "hidden.py": WORDSTATS_HIDDEN},
    }


MAKEFILE_BUGGY = """\
# Build build/report.txt from the header and body in src/.
all: build/report.txt

build/report.txt: src/header.txt src/body.text
    mkdir -p build
    cat src/header.txt src/body.txt > build/report.txt

clean:
    rm -rf build

.PHONY: all clean
"""


def fix_makefile() -> dict[str, Any]:
    files = {"Makefile": MAKEFILE_BUGGY, "src/header.txt": "MONTHLY REPORT\n", "src/body.txt": "All systems normal.\n"}
    tests = run_tests("fix-makefile", """
check builds bash -c 'make clean >/dev/null 2>&1; rm -rf build; make && test -f build/report.txt'
check report-content bash -c 'test "$(cat build/report.txt)" = "$(printf "MONTHLY REPORT\\nAll systems normal.")"'
check up-to-date-after-build make -q build/report.txt
rebuilds() {
    touch -d '2001-01-01' build/report.txt && printf 'Something changed.\\n' > src/body.txt
    make >/dev/null && grep -qx 'Something changed.' build/report.txt
}
check rebuilds-when-body-changes rebuilds
check clean-removes-build bash -c 'make clean && test ! -e build'
""")
    return {
        "id": "fix-makefile", "difficulty": 3, "files": files,
        "prompt": "Running `make` should build build/report.txt from src/header.txt and src/body.txt, but it "
                  "fails. Fix the Makefile (not the sources) so that `make` builds the report, rebuilds it when "
                  "a source changes, and `make clean` removes build/.",
        "solution": ["make 2>&1 | head -n 3",
                     "sed -i -e 's/^    /\\t/' -e 's/body\\.text/body.txt/' Makefile",
                     "make && cat build/report.txt"],
        "tests": {"run-tests.sh": tests},
    }


PHOTOS = ["Beach Day.JPG", "Mountain Trip.jpg", "city.png", "Old Town Walk.PNG"]


def rename_lowercase() -> dict[str, Any]:
    files = {f"photos/{name}": f"image data of {name}\n" for name in PHOTOS}
    lines = []
    for name in PHOTOS:
        new = name.lower().replace(" ", "_")
        lines.append(f'check {new} bash -c \'grep -qx "image data of {name}" "photos/{new}"\'')
    tests = run_tests("rename-lowercase", "\n".join(lines) + """
check nothing-else bash -c 'test "$(ls photos | wc -l)" = 4'
""")
    return {
        "id": "rename-lowercase", "difficulty": 1, "files": files,
        "prompt": "Rename every file in photos/ so that its name is lower case with spaces replaced by "
                  "underscores (for example \"Beach Day.JPG\" becomes \"beach_day.jpg\"). Keep the files' contents.",
        "solution": ["cd photos && for f in *; do n=$(printf '%s' \"$f\" | tr 'A-Z ' 'a-z_'); "
                     "[ \"$f\" = \"$n\" ] || mv \"$f\" \"$n\"; done && ls"],
        "tests": {"run-tests.sh": tests},
    }


CUSTOMERS = [(1, "Ana Costa", "Lisbon"), (2, "Ben Okafor", "Lagos"), (3, "Chen Wei", "Taipei"),
             (4, "Dara Quinn", "Cork"), (5, "Eli Stern", "Haifa")]
ORDERS = [(101, 2, "19.99"), (102, 1, "5.00"), (103, 2, "7.50"), (104, 4, "120.00"), (105, 1, "5.00"),
          (106, 3, "33.30"), (107, 2, "2.51"), (108, 3, "0.20")]

CSV_JOIN_SOLUTION = """\
python3 - <<'EOF'
import csv
names = {r["id"]: r["name"] for r in csv.DictReader(open("data/customers.csv"))}
totals = {}
for r in csv.DictReader(open("data/orders.csv")):
    n, t = totals.get(r["customer_id"], (0, 0.0))
    totals[r["customer_id"]] = (n + 1, t + float(r["amount"]))
with open("report.csv", "w") as out:
    out.write("name,orders,total\\n")
    for cid, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        out.write(f"{names[cid]},{n},{t:.2f}\\n")
EOF"""


def csv_join() -> dict[str, Any]:
    customers = "id,name,city\n" + "".join(f"{i},{n},{c}\n" for i, n, c in CUSTOMERS)
    orders = "order_id,customer_id,amount\n" + "".join(f"{o},{c},{a}\n" for o, c, a in ORDERS)
    totals: dict[int, tuple[int, float]] = {}
    for _, cid, amount in ORDERS:
        n, t = totals.get(cid, (0, 0.0))
        totals[cid] = (n + 1, t + float(amount))
    names = {i: n for i, n, _ in CUSTOMERS}
    expected = "name,orders,total\n" + "".join(
        f"{names[cid]},{n},{t:.2f}\n" for cid, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]))
    tests = run_tests("csv-join", """
check file-written test -f report.csv
check header bash -c 'test "$(head -n 1 report.csv)" = name,orders,total'
check customers-without-orders-left-out bash -c '! grep -q "Eli Stern" report.csv'
check totals-and-order diff "$T/expected.csv" report.csv
""")
    return {
        "id": "csv-join", "difficulty": 3, "files": {"data/customers.csv": customers, "data/orders.csv": orders},
        "prompt": "From data/customers.csv and data/orders.csv, write report.csv with the header line "
                  "`name,orders,total` and one line per customer who placed at least one order: the customer's "
                  "name, how many orders they placed and the sum of their order amounts with two decimals, "
                  "sorted by that sum, largest first.",
        "solution": [CSV_JOIN_SOLUTION],
        "tests": {"run-tests.sh": tests, "expected.csv": expected},
    }


# ----------------------------------------------------------- held-out tasks (test split)

APP_JSON = '{\n  "name": "shop",\n  "port": 3000,\n  "features": {"search": true, "cart": false},\n' \
           '  "admins": ["ana"],\n  "theme": "light"\n}\n'

JSON_CHECK = '''\
import json


def check(name, ok):
    print(("PASS " if ok else "FAIL ") + name)


try:
    config = json.load(open("config/app.json"))
except Exception:
    config = None
check("valid-json", isinstance(config, dict))
config = config if isinstance(config, dict) else {}
check("port", config.get("port") == 8080)
check("cart-on", config.get("features") == {"search": True, "cart": True})
check("admins", config.get("admins") == ["ana", "ben"])
check("debug-off", config.get("debug") is False)
check("rest-kept", config.get("name") == "shop" and config.get("theme") == "light" and len(config) == 6)
'''


def json_config() -> dict[str, Any]:
    return {
        "id": "json-config", "difficulty": 2, "files": {"config/app.json": APP_JSON},
        "prompt": "Edit config/app.json: set port to 8080, switch the cart feature on, add \"ben\" to the admins "
                  "after \"ana\" and add a top-level \"debug\": false. Keep every other setting, and keep the file "
                  "valid JSON.",
        "solution": ["jq '.port = 8080 | .features.cart = true | .admins += [\"ben\"] | .debug = false' "
                     "config/app.json > config/app.json.new && mv config/app.json.new config/app.json"],
        "tests": {"run-tests.sh": run_tests("json-config", 'python3 "$T/check.py"\n'), "check.py": JSON_CHECK},
    }


PAGES_BUGGY = '''\
"""Split a list into pages."""


def page_count(total, page_size):
    """How many pages ``total`` items fill, ``page_size`` to a page (0 items: 0 pages)."""
    return total // page_size


def page(items, page_size, number):
    """Page ``number`` (counted from 1) of ``items``; an empty list past the last page."""
    start = number * page_size
    return items[start:start + page_size]
'''

PAGES_FIXED = PAGES_BUGGY.replace("return total // page_size", "return -(-total // page_size)").replace(
    "start = number * page_size", "start = (number - 1) * page_size")

PAGES_TESTS = '''\
import unittest

from pager.pages import page, page_count


class PagesTest(unittest.TestCase):
    def test_count_exact(self):
        self.assertEqual(page_count(20, 10), 2)

    def test_count_partial_last_page(self):
        self.assertEqual(page_count(21, 10), 3)

    def test_count_empty(self):
        self.assertEqual(page_count(0, 10), 0)

    def test_first_page(self):
        self.assertEqual(page(list(range(7)), 3, 1), [0, 1, 2])

    def test_last_page(self):
        self.assertEqual(page(list(range(7)), 3, 3), [6])


if __name__ == "__main__":
    unittest.main()
'''

PAGES_HIDDEN = '''\
import sys

sys.path.insert(0, ".")


def check(name, fn):
    try:
        ok = fn()
    except Exception:
        ok = False
    print(("PASS " if ok else "FAIL ") + name)


try:
    from pager.pages import page, page_count
except Exception:
    page = page_count = None
check("hidden-count", lambda: [page_count(n, 4) for n in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3])
check("hidden-pages", lambda: [page(list("abcde"), 2, k) for k in (1, 2, 3, 4)] == [["a", "b"], ["c", "d"], ["e"], []])
'''


def fix_pagination() -> dict[str, Any]:
    files = {"pager/__init__.py": "", "pager/pages.py": PAGES_BUGGY, "test_pages.py": PAGES_TESTS}
    tests = run_tests("fix-pagination", """
check suite-passes python3 -m unittest -q test_pages
check tests-unchanged diff "$T/test_pages.py" test_pages.py
python3 "$T/hidden.py"
""")
    return {
        "id": "fix-pagination", "difficulty": 3, "files": files,
        "prompt": "The tests of the pager package fail (`python3 -m unittest -v` shows how). Fix pager/pages.py "
                  "so that they pass, without changing the tests: pages are counted from 1, and a last page "
                  "that is not full still counts as a page.",
        "solution": ["python3 -m unittest 2>&1 | tail -n 3",
                     "cat > pager/pages.py <<'EOF'\n" + PAGES_FIXED + "EOF",
                     "python3 -m unittest -q"],
        "tests": {"run-tests.sh": tests, "test_pages.py": PAGES_TESTS, "hidden.py": PAGES_HIDDEN},
    }


PROJECT_SIZES = {"project/README.md": 400, "project/src/main.c": 2400, "project/src/util.c": 1000,
                 "project/src/util.h": 180, "project/docs/manual.txt": 5200, "project/docs/notes.txt": 1001,
                 "project/assets/logo.svg": 3000}


def find_large_files() -> dict[str, Any]:
    files = {}
    for path, size in PROJECT_SIZES.items():
        line = f"{path} filler line\n"
        text = (line * (size // len(line) + 1))[: size - 1] + "\n"
        assert len(text.encode()) == size
        files[path] = text
    expected = "".join(f"{p}\n" for p in sorted(p for p, s in PROJECT_SIZES.items() if s > 1000))
    tests = run_tests("find-large-files", """
check file-written test -f large_files.txt
check exactly-1000-left-out bash -c '! grep -q util.c large_files.txt'
check list diff "$T/expected.txt" large_files.txt
""")
    return {
        "id": "find-large-files", "difficulty": 2, "files": files,
        "prompt": "Write large_files.txt listing every file under project/ that is larger than 1000 bytes, one "
                  "path per line, relative to the workspace (like project/src/main.c), sorted.",
        "solution": ["find project -type f -size +1000c | LC_ALL=C sort > large_files.txt"],
        "tests": {"run-tests.sh": tests, "expected.txt": expected},
    }


EMAILS = ["ana@example.org", "Ben@Example.org ", "carla@example.net", "ana@example.org", "BEN@example.org",
          "  dev@example.com", "carla@example.net  ", "eve@example.com", "Dev@Example.com"]


def dedupe_emails() -> dict[str, Any]:
    seen: list[str] = []
    for e in EMAILS:
        if e.strip().lower() not in seen:
            seen.append(e.strip().lower())
    tests = run_tests("dedupe-emails", """
check file-written test -f contacts/unique.txt
check unique bash -c 'test "$(sort contacts/unique.txt | uniq -d | wc -l)" = 0'
check first-appearance-order diff "$T/expected.txt" contacts/unique.txt
check source-kept diff "$T/emails.txt" contacts/emails.txt
""")
    emails = "".join(e + "\n" for e in EMAILS)
    return {
        "id": "dedupe-emails", "difficulty": 1, "files": {"contacts/emails.txt": emails},
        "prompt": "contacts/emails.txt lists e-mail addresses, one per line, with repeats (some differ only in "
                  "upper and lower case, or in spaces around them). Write contacts/unique.txt with each address "
                  "once, in lower case, without the spaces, in the order of first appearance.",
        "solution": ["python3 -c 'import sys; seen = dict.fromkeys(l.strip().lower() for l in sys.stdin if l.strip()); "
                     "print(*seen, sep=\"\\n\")' < contacts/emails.txt > contacts/unique.txt"],
        "tests": {"run-tests.sh": tests, "expected.txt": "".join(e + "\n" for e in seen), "emails.txt": emails},
    }


SPLITS = {
    "train": [organise_inbox, extract_errors, status_counts, fix_backup_script, fix_failing_tests, fix_makefile],
    "dev": [fix_permissions, rename_lowercase, fix_csv_total, csv_join],
    "test": [dedupe_emails, json_config, find_large_files, fix_pagination],
}
HELD_OUT = {"test"}


def build() -> dict[str, list[dict[str, Any]]]:
    """Every split's task rows, in order."""
    return {split: [make() for make in makers] for split, makers in SPLITS.items()}


def write(out: Path) -> None:
    tasks_dir, tests_dir = out / "tasks", out / "tests"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    if tests_dir.exists():
        shutil.rmtree(tests_dir)
    tests_dir.mkdir(parents=True)
    for split, rows in build().items():
        lines = []
        for row in rows:
            if split not in HELD_OUT:
                # A public task's tests go to tests/<id>/; the row names the directory.
                for name, text in row["tests"].items():
                    (tests_dir / row["id"]).mkdir(exist_ok=True)
                    (tests_dir / row["id"] / name).write_text(text)
                row = {**row, "tests": row["id"]}
            lines.append(json.dumps(row, sort_keys=True, ensure_ascii=False))
        data = ("\n".join(lines) + "\n").encode()
        (tasks_dir / f"{split}.jsonl").write_bytes(data)
        print(f"{split}: {len(rows)} rows, sha256 {hashlib.sha256(data).hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="write tasks/ and tests/ under this directory")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
