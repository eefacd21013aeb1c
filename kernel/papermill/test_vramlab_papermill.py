"""Tests of the Go parameter translator (run by kernel/scripts/test.sh)."""
import os
import shutil
import subprocess
import tempfile
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

    def test_names_must_be_go_identifiers(self):
        # A trailing newline passed `^…$` once; predeclared names declared
        # `var true = false`.
        for bad in ["plan\n", "\nplan", "pl an", "true", "false", "nil", "iota", "len", "string", "any", "_", "9x", ""]:
            with self.assertRaises(PapermillException, msg=repr(bad)):
                GoTranslator.assign(bad, "1")
        self.assertEqual(GoTranslator.assign("_plan2", "1"), "var _plan2 = 1")

    def test_values_that_would_not_compile(self):
        # Go source may not contain U+FEFF: it is escaped; a lone surrogate
        # (YAML's "\ud83d") and integers past int64 are refused.
        self.assertEqual(GoTranslator.translate("a\ufeffb"), '"a\\ufeffb"')
        with self.assertRaises(PapermillException):
            GoTranslator.translate("x\ud83dy")
        with self.assertRaises(PapermillException):
            GoTranslator.translate(2**63)
        self.assertEqual(GoTranslator.translate(-(2**63)), str(-(2**63)))
        self.assertEqual(GoTranslator.translate(["😀", "\u2028"]), '[]string{"😀", "\u2028"}')

    def test_codify_and_inspect(self):
        code = GoTranslator.codify({"plan": "a.json", "batch": 4})
        self.assertEqual(code, '// Parameters\nvar plan = "a.json"\nvar batch = 4\n')

        class Cell:
            source = 'var plan = ""  // a plan file\nvar gpus = []string{}\n'
        params = GoTranslator.inspect(Cell)
        self.assertEqual([p.name for p in params], ["plan", "gpus"])
        self.assertEqual(params[0].help, "a plan file")


    @unittest.skipUnless(shutil.which("go"), "no Go toolchain")
    def test_declarations_compile(self):
        # Every value the translator accepts compiles as Go, hostile ones too.
        values = {"plan": 'a"b\\c\nd\x00\ufeff\u2028😀\t', "plans": ["x.json", "日本.json"], "n": -(2**63), "f": 1e300,
                  "ok": True, "m": {"k\n": [1, 2.5]}, "nested": [["a"], [1]]}
        code = GoTranslator.codify(values)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "go.mod"), "w") as f:
                f.write("module p\n\ngo 1.22\n")
            with open(os.path.join(d, "p.go"), "w", encoding="utf-8") as f:
                f.write("package p\n\n" + code + "\nvar _ = []any{plan, plans, n, f, ok, m, nested}\n")
            r = subprocess.run(["go", "vet", "."], cwd=d, capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
            self.assertEqual(r.returncode, 0, r.stderr + code)


if __name__ == "__main__":
    unittest.main()
