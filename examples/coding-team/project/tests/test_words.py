import unittest

from textkit.words import word_count


class WordsTest(unittest.TestCase):
    def test_count(self) -> None:
        self.assertEqual(word_count("one two\tthree\nfour"), 4)
        self.assertEqual(word_count("  spaced   out  "), 2)
        self.assertEqual(word_count(""), 0)
