import unittest

from wordstats import top_words, word_count


class WordCountTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(word_count("one two three"), 3)

    def test_lines_and_tabs(self):
        self.assertEqual(word_count("one\ntwo\tthree  four"), 4)

    def test_punctuation(self):
        self.assertEqual(word_count("Hello, world! (again)"), 3)


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_ties_alphabetical(self):
        self.assertEqual(top_words("pear apple fig", 3), [("apple", 1), ("fig", 1), ("pear", 1)])


if __name__ == "__main__":
    unittest.main()
