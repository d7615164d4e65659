import unittest

from textkit.title import title_case


class TitleTest(unittest.TestCase):
    def test_title(self) -> None:
        self.assertEqual(title_case("the lord of the rings"), "The Lord of the Rings")
        self.assertEqual(title_case("war and peace"), "War and Peace")
