#!/usr/bin/env python3
"""Keeps the C++ snippets of README.md and docs/ equal to the programs the tests compile.

Every ```cpp block of a markdown file is preceded by a marker naming the program it shows:

    <!-- snippet: docs/snippets/compile_gelu.cpp -->
    ```cpp
    ...the lines between `// snippet-begin` and `// snippet-end` of that file...
    ```

and a block showing a program's output by

    <!-- snippet-output: docs/snippets/arrays_print.out -->
    ```text
    ...that file, which the program's test compares with what it prints...
    ```

Usage (from anywhere; paths are relative to the repository root, or to DIR after --root DIR,
which tests/docs/sync_doc_snippets_test.py uses):
    scripts/sync_doc_snippets.py            rewrite the blocks from their files
    scripts/sync_doc_snippets.py --check    exit 1, with a diff, when a block differs from its
                                            file, a ```cpp block has no marker, a marker names a
                                            missing file, or a snippet file is shown nowhere
    scripts/sync_doc_snippets.py run EXE SOURCE.cpp
                                            run a snippet program (the ctest command): exit 77
                                            (skipped) passes through; where SOURCE.out exists,
                                            stdout must equal it
docs/dev/snippets.md says how to add a snippet. Python standard library only.
"""

import difflib
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNIPPET_DIRS = ["docs/snippets"]  # every .cpp here must be shown by some document
MARKER = re.compile(r"^<!-- snippet(-output)?: (\S+) -->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
CPP_LANGS = {"cpp", "c++", "cxx", "cc"}
SKIP_CODE = 77  # ctest's SKIP_RETURN_CODE for snippets that need a GPU


def documents():
    docs = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [d for d in docs if d.is_file()]


def dedent(lines):
    indents = [len(l) - len(l.lstrip(" ")) for l in lines if l.strip()]
    cut = min(indents, default=0)
    return [l[cut:] if l.strip() else "" for l in lines]


def shown_lines(source: pathlib.Path):
    """The lines a document shows of a program: its `// snippet-begin` .. `// snippet-end`
    regions, each dedented, in order with a blank line between them; without regions, the file
    after its leading comment lines (the purpose comment and `// snippet-requires:`)."""
    lines = source.read_text().splitlines()
    shown, region, inside = [], [], False
    for n, line in enumerate(lines, 1):
        tag = line.strip()
        if tag == "// snippet-begin":
            if inside:
                raise SystemExit(f"{source}:{n}: snippet-begin inside a region")
            inside, region = True, []
        elif tag == "// snippet-end":
            if not inside:
                raise SystemExit(f"{source}:{n}: snippet-end without snippet-begin")
            inside = False
            shown += ([""] if shown else []) + dedent(region)
        elif inside:
            region.append(line)
    if inside:
        raise SystemExit(f"{source}: snippet-begin without snippet-end")
    if shown or any(l.strip() == "// snippet-end" for l in lines):
        return shown
    start = 0
    while start < len(lines) and (lines[start].startswith("//") or not lines[start].strip()):
        start += 1
    return lines[start:]


def expected_block(kind, path: pathlib.Path):
    if kind == "output":
        return path.read_text().splitlines()
    return shown_lines(path)


def process(doc: pathlib.Path, write: bool, used: set):
    """Returns (problems, new text) for one document."""
    rel = doc.relative_to(ROOT)
    lines = doc.read_text().splitlines(keepends=False)
    out, problems, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        if marker:
            kind = "output" if marker.group(1) else "snippet"
            target = ROOT / marker.group(2)
            out.append(line)
            i += 1
            if i >= len(lines) or not FENCE.match(lines[i]):
                problems.append(f"{rel}:{i}: the marker must be followed by a ``` fence")
                continue
            open_line = lines[i]
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end >= len(lines):
                problems.append(f"{rel}:{i + 1}: unclosed ``` fence")
                out += lines[i:]
                break
            current = lines[i + 1:end]
            if not target.is_file():
                problems.append(f"{rel}:{i}: {marker.group(2)} does not exist")
                want = current
            else:
                used.add(target.resolve())
                want = expected_block(kind, target)
            if want != current:
                diff = difflib.unified_diff(current, want, f"{rel} (line {i + 2})", marker.group(2),
                                            lineterm="")
                problems.append(f"{rel}:{i + 2}: the block differs from {marker.group(2)}:\n" +
                                "\n".join(diff))
            out += [open_line] + want + ["```"]
            i = end + 1
            continue
        if fence:
            lang = fence.group(1).lower()
            if lang in CPP_LANGS:
                problems.append(f"{rel}:{i + 1}: a ```{fence.group(1)} block without a "
                                "<!-- snippet: FILE --> marker (docs/dev/snippets.md)")
            # copy any unmarked block through untouched (shell sessions, CLI output, ...)
            out.append(line)
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                out.append(lines[i])
                i += 1
            if i < len(lines):
                out.append(lines[i])
                i += 1
            continue
        out.append(line)
        i += 1
    text = "\n".join(out) + "\n"
    if write and text != doc.read_text():
        doc.write_text(text)
        print(f"updated {rel}")
    return problems


def sync(check: bool) -> int:
    used, problems = set(), []
    for doc in documents():
        problems += process(doc, write=not check, used=used)
    for folder in SNIPPET_DIRS:
        for src in sorted((ROOT / folder).glob("*.cpp")):
            if src.resolve() not in used:
                problems.append(f"{src.relative_to(ROOT)} is shown by no document (add a "
                                "<!-- snippet: ... --> block, or delete it)")
    if check:
        for p in problems:
            print(p)
        if problems:
            print(f"{len(problems)} problem(s); scripts/sync_doc_snippets.py refreshes the blocks "
                  "from their files")
            return 1
        print("every C++ block of README.md and docs/ matches its snippet file")
        return 0
    # writing fixes differing blocks; what remains needs a person (a missing marker or file)
    remaining = [p for p in problems if "differs" not in p]
    for p in remaining:
        print(p)
    return 1 if remaining else 0


def run(argv) -> int:
    if len(argv) != 2:
        raise SystemExit("usage: sync_doc_snippets.py run EXE SOURCE.cpp")
    exe = argv[0]
    expect = pathlib.Path(argv[1]).with_suffix(".out")
    if not expect.is_file():
        expect = None
    proc = subprocess.run([exe], stdout=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode == SKIP_CODE:
        return SKIP_CODE
    if proc.returncode != 0:
        print(f"{exe} exited with {proc.returncode}")
        return 1
    if expect is not None:
        want = expect.read_text().splitlines()
        got = proc.stdout.splitlines()
        if want != got:
            print(f"the output differs from {expect} (update it, and the documents with "
                  "scripts/sync_doc_snippets.py, when the change is intended):")
            print("\n".join(difflib.unified_diff(want, got, str(expect), "output", lineterm="")))
            return 1
    return 0


def main(argv) -> int:
    global ROOT
    if len(argv) >= 2 and argv[0] == "--root":
        ROOT = pathlib.Path(argv[1]).resolve()
        argv = argv[2:]
    if argv and argv[0] == "run":
        return run(argv[1:])
    if argv not in ([], ["--check"]):
        print(__doc__)
        return 2
    return sync(check=argv == ["--check"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
