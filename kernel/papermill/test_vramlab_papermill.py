"""Tests of the Go parameter translator (run by kernel/scripts/test.sh)."""
import unittest

import papermill
from papermill.exceptions import PapermillException
from papermill.translators import papermill_translators

import vramlab_papermill
from vramlab_papermill import GoTranslator


class GoTranslatorTest(unittest.TestCase):
    def test_registered_at_papermill_start(self):
        # Importing papermill loads the engine entry point, which registers Go.
        self.assertIs(papermill_translators.find_translator("vramlab", "go"), GoTranslator)

    def test_values(self):
        cases = [
            ("plans/x.json", '"plans/x.json"'),
            ('a"b\\c\nd', '"a\\"b\\\\c\\nd"'),
            ("日本", '"日本"'),
            (5, "5"),
            (2.5, "2.5"),
            (True, "true"),
        ]
        for val, want in cases:
            self.assertEqual(GoTranslator.translate(val), want, val)
        self.assertEqual(GoTranslator.translate(["a", "b"]), '[]string{"a", "b"}')
        self.assertEqual(GoTranslator.translate([1, 2]), "[]int{1, 2}")
        self.assertEqual(GoTranslator.translate([1, 2.5]), "[]float64{1, 2.5}")
        self.assertEqual(GoTranslator.translate(["a", 1]), '[]any{"a", 1}')
        self.assertEqual(GoTranslator.translate({"gpu": "H100-80GB"}), 'map[string]string{"gpu": "H100-80GB"}')

    def test_hostile_string_stays_a_string(self):
        s = '"; panic("x"); var y = "'
        self.assertEqual(GoTranslator.assign("plan", GoTranslator.translate(s)), 'var plan = "\\"; panic(\\"x\\"); var y = \\""')

    def test_rejects(self):
        with self.assertRaises(PapermillException):
            GoTranslator.translate(None)
        with self.assertRaises(PapermillException):
            GoTranslator.assign("func", "1")
        with self.assertRaises(PapermillException):
            GoTranslator.assign("a-b", "1")
        with self.assertRaises(PapermillException):
            GoTranslator.translate(float("nan"))

    def test_codify_and_inspect(self):
        code = GoTranslator.codify({"plan": "a.json", "batch": 4})
        self.assertEqual(code, '// Parameters\nvar plan = "a.json"\nvar batch = 4\n')

        class Cell:
            source = 'var plan = ""  // a plan file\nvar gpus = []string{}\n'
        params = GoTranslator.inspect(Cell)
        self.assertEqual([p.name for p in params], ["plan", "gpus"])
        self.assertEqual(params[0].help, "a plan file")


if __name__ == "__main__":
    unittest.main()
