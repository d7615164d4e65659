import unittest

from textkit.slug import slugify


class SlugTest(unittest.TestCase):
    def test_slug(self) -> None:
        self.assertEqual(slugify("Hello, World!"), "hello-world")
        self.assertEqual(slugify("  Tenure   teams "), "tenure-teams")
