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
    check("hidden-newlines", lambda: word_count("a\nb\n\nc") == 3)
    check("hidden-ties", lambda: top_words("z y x z y x w", 3) == [("x", 2), ("y", 2), ("z", 2)])
    check("hidden-case", lambda: top_words("The the THE cat", 1) == [("the", 3)])


try:
    run()
except Exception:
    for name in ("hidden-newlines", "hidden-ties", "hidden-case"):
        print("FAIL " + name)
