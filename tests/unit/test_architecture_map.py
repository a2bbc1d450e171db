"""docs/architecture.md cannot drift from the code: its layout tree names every module under
src/rlperf and nothing else, and its import floors are the import-linter contract's layers."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _code_block_after(heading: str) -> str:
    return DOC.split(heading, 1)[1].split("```", 2)[1]


def documented_modules() -> set[str]:
    """Paths under src/rlperf named in the layout tree (two spaces of indent per level; a
    first word ending in / opens a folder, one ending in .py names a module)."""
    folders: list[str] = []
    found = set()
    for line in _code_block_after("## Layout").splitlines():
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words or indent % 2 or not words[0].endswith(("/", ".py")):
            continue  # a blank line or a description's continuation
        folders = folders[: indent // 2]
        if words[0].endswith("/"):
            folders.append(words[0].rstrip("/"))
        elif folders[:1] == ["src/rlperf"]:
            found.add("/".join([*folders[1:], words[0]]))
    return found


def test_the_layout_tree_names_every_module_and_no_other():
    package = ROOT / "src" / "rlperf"
    modules = {
        p.relative_to(package).as_posix() for p in package.rglob("*.py") if p.name != "__init__.py"
    }
    documented = documented_modules()
    assert not modules - documented, (
        f"add to docs/architecture.md's layout: {sorted(modules - documented)}"
    )
    assert not documented - modules, f"no such module: {sorted(documented - modules)}"


def test_the_floors_on_the_page_are_the_import_contract():
    page = []
    for line in _code_block_after("## Import floors").splitlines():
        floor = line.split("  ", 1)[0].strip()  # drop the notes after two spaces
        if floor:
            page.append([name.strip() for name in floor.split("|")])
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    layers = [
        [n.strip().removeprefix("rlperf.") for n in layer.split("|")]
        for layer in contract["layers"]
    ]
    assert page == layers
