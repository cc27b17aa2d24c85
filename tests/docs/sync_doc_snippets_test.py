#!/usr/bin/env python3
"""scripts/sync_doc_snippets.py on a small tree: what --check refuses, what a sync writes, and how
`run` checks a program's output and passes a skip through. Python standard library only."""

import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sync_doc_snippets.py"

PROGRAM = textwrap.dedent("""\
    // docs/guide.md: an example.
    // snippet-begin
    #include <cstdio>
    // snippet-end

    int main() {
      int x = 2;
      // snippet-begin
      std::printf("%d\\n", x * 21);
      // snippet-end
    }
    """)
SHOWN = '#include <cstdio>\n\nstd::printf("%d\\n", x * 21);\n'


def doc(block: str, output: str = "42\n") -> str:
    return ("# Guide\n\n<!-- snippet: docs/snippets/ex.cpp -->\n```cpp\n" + block + "```\n\n"
            "<!-- snippet-output: docs/snippets/ex.out -->\n```text\n" + output + "```\n\n"
            "```sh\nls   # other blocks are not checked\n```\n")


class SyncDocSnippets(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.tmp.name)
        (self.root / "docs" / "snippets").mkdir(parents=True)
        (self.root / "README.md").write_text("# Project\n")
        (self.root / "docs" / "snippets" / "ex.cpp").write_text(PROGRAM)
        (self.root / "docs" / "snippets" / "ex.out").write_text("42\n")
        self.guide = self.root / "docs" / "guide.md"

    def tearDown(self):
        self.tmp.cleanup()

    def script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def test_regions_are_dedented_and_joined_by_a_blank_line(self):
        self.guide.write_text(doc(SHOWN))
        r = self.script("--check")
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_a_differing_block_fails_and_a_sync_rewrites_it(self):
        self.guide.write_text(doc("std::printf(\"%d\\n\", 43);\n"))
        r = self.script("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/guide.md:5: the block differs from docs/snippets/ex.cpp", r.stdout)
        self.assertIn("-std::printf(\"%d\\n\", 43);", r.stdout)
        self.assertEqual(self.script().returncode, 0)
        self.assertEqual(self.guide.read_text(), doc(SHOWN))
        self.assertEqual(self.script("--check").returncode, 0)

    def test_shown_output_must_equal_the_out_file(self):
        self.guide.write_text(doc(SHOWN, output="41\n"))
        r = self.script("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the block differs from docs/snippets/ex.out", r.stdout)

    def test_a_cpp_block_without_a_marker_fails(self):
        self.guide.write_text(doc(SHOWN) + "\n```cpp\nint y;\n```\n")
        r = self.script("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("a ```cpp block without a <!-- snippet: FILE --> marker", r.stdout)
        self.assertEqual(self.script().returncode, 1)  # a sync cannot fix it either

    def test_a_missing_file_and_an_unshown_snippet_fail(self):
        self.guide.write_text(doc(SHOWN).replace("snippets/ex.cpp", "snippets/gone.cpp"))
        r = self.script("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("docs/snippets/gone.cpp does not exist", r.stdout)
        self.assertIn("docs/snippets/ex.cpp is shown by no document", r.stdout)

    def program(self, body: str) -> str:
        exe = self.root / "prog.sh"
        exe.write_text("#!/bin/sh\n" + body)
        exe.chmod(0o755)
        return str(exe)

    def test_run_compares_the_output_with_the_out_file(self):
        src = str(self.root / "docs" / "snippets" / "ex.cpp")
        self.assertEqual(self.script("run", self.program("echo 42\n"), src).returncode, 0)
        r = self.script("run", self.program("echo 43\n"), src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the output differs from", r.stdout)
        self.assertIn("+43", r.stdout)

    def test_run_without_an_out_file_only_needs_success(self):
        src = str(self.root / "docs" / "snippets" / "other.cpp")
        self.assertEqual(self.script("run", self.program("echo anything\n"), src).returncode, 0)
        r = self.script("run", self.program("exit 3\n"), src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exited with 3", r.stdout)

    def test_run_passes_a_skip_through(self):
        src = str(self.root / "docs" / "snippets" / "ex.cpp")
        r = self.script("run", self.program("echo 'skipped: needs a CUDA GPU'; exit 77\n"), src)
        self.assertEqual(r.returncode, 77)


if __name__ == "__main__":
    unittest.main()
