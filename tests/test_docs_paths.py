"""Every repository path the documentation names exists: README.md, docs/*.md and docs/decisions/*.md.

What counts as a path (fenced code blocks are commands and examples, not references: left out):
- a relative Markdown link target (`[text](target)`), resolved from the linking file's folder, as
  GitHub resolves it; its `#anchor`, if any, must be one GitHub gives a heading of the target;
- a token of an inline code span that starts with a top-level folder of the repository
  (`provider/`, `tests/`, `dags/`, `include/`, `benchmarks/`, `docs/`, `schemas/`, `docker/`,
  `requirements/`, `.ci/`), resolved from the repository root; a glob (`docs/decisions/0*.md`)
  must match a file;
- a token that names a module or folder of the provider package the way the docs do
  (`spark/routing.py`, `delta_rs/`, `placsp_provider/cli.py`), resolved against
  provider/placsp_provider/; with an attribute (`spark/routing.stage_page`, `feed/xml.ends_with_feed_end`)
  the module must exist and define that name;
- `path::name` (a test) must name a file that holds `name`;
- a dotted name under the package (`placsp_provider.operators.extract.PlacspExtractOperator(...)`,
  `placsp_provider.spark.routing.dead_letter_id`): its module must exist and define the next name.

Left out on purpose (`RUNTIME_MARKERS`, `GENERATED`): folders .gitignore names, which a run writes
(`benchmarks/out/*.json`), and templates of paths the pipeline writes at run time, which
carry a placeholder (`<lake>/...`, `bronze/<dataset>/manifests/...`, `$LAKE/runs/...`,
`{entries,lots}`) or are cut short with an ellipsis (`bronze/agregadas/pages/Plataformas…atom`).
A lake folder that shares its name with a package (`bronze/`, `dead_letters/`) only reaches the
module rule when it names a `.py` file, a trailing-slash folder or an attribute, so a bare lake path
such as `dead_letters/_delta_log` is checked only if it ends in one of those.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

PACKAGE = REPO / "provider" / "placsp_provider"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs" / "decisions").glob("*.md"))]

TOP_LEVEL = ("provider/", "tests/", "dags/", "include/", "benchmarks/", "docs/", "schemas/", "docker/",
             "requirements/", ".ci/")  # fmt: skip
# The provider's subpackages: `spark/routing.py` means provider/placsp_provider/spark/routing.py.
MODULE_ROOTS = tuple(sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
# A placeholder or an ellipsis marks a path written at run time (a lake path) or an example cut short.
RUNTIME_MARKERS = ("<", ">", "$", "{", "}", "…", "...")
# Folders .gitignore names (`benchmarks/out/`): written by a run (`make bench`'s raw JSON), never committed.
GENERATED = tuple(
    line.strip().lstrip("/")
    for line in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    if line.strip().endswith("/") and not line.startswith("#")
)

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_TOKEN_EDGE = "\"'()[],;:"
_ATTRIBUTE = re.compile(r"^(?P<module>[\w/]+)\.(?P<name>[A-Za-z_]\w*)$")


def _prose(text: str) -> str:
    return _FENCE.sub("", text)


def link_targets(text: str) -> list[tuple[str, str]]:
    """(path, anchor) of every relative link; path "" for an anchor in the same page."""
    out = []
    for target in _LINK.findall(_prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL: http:, mailto:, file:
        path, _, anchor = target.partition("#")
        out.append((path, anchor))
    return out


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation dropped
    (inline code and links keep their text), spaces as hyphens, repeats numbered -1, -2, ..."""
    out: set[str] = set()
    count: dict[str, int] = {}
    for line in _prose(doc.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading[1])
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        out.add(f"{slug}-{count[slug]}" if slug in count else slug)
        count[slug] = count.get(slug, 0) + 1
    return out


def code_tokens(text: str) -> list[str]:
    tokens = []
    for _, span in _CODE_SPAN.findall(_prose(text)):
        for token in span.split():
            token = token.strip(_TOKEN_EDGE)
            token = re.sub(r":\d+$", "", token)  # path:line
            if token:
                tokens.append(token)
    return tokens


def _is_runtime(token: str) -> bool:
    return any(m in token for m in RUNTIME_MARKERS) or "://" in token or token.startswith("/")


def _defines(module: Path, name: str) -> bool:
    """`name` is a function or class anywhere in the module, or a module-level assignment or import."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom) and any(
            (a.asname or a.name).split(".")[0] == name for a in node.names
        ):
            return True
    return False


def _names_in_code() -> set[str]:
    """Dotted strings the provider's code itself uses (logger names such as `placsp_provider.alerts`):
    names, not module paths."""
    out = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value.startswith("placsp_provider."):
                out.add(value)
    return out


NAMES_IN_CODE = _names_in_code()


def _dotted_problem(token: str) -> str | None:
    """`placsp_provider.a.b.Name...`: the longest prefix that is a module must define the next part."""
    name = re.match(r"[\w.]*", token)[0].rstrip(".")  # up to a "(" of a signature
    if name in NAMES_IN_CODE:
        return None
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        base = PACKAGE.joinpath(*parts[1:i])
        module = base.with_suffix(".py") if not base.is_dir() else base / "__init__.py"
        if module.is_file():
            if i == len(parts) or _defines(module, parts[i]):
                return None
            return f"{module.relative_to(REPO)} defines no {parts[i]}"
    return None if len(parts) == 1 else f"no module {'.'.join(parts[:2])}"


def problem(token: str) -> str | None:
    """Why `token` (a code-span token) is a repository path that does not exist; None when it exists
    or is not a repository path."""
    if token.startswith("placsp_provider."):
        return _dotted_problem(token)
    if _is_runtime(token):
        return None
    path, _, test_name = token.partition("::")
    if path.startswith(GENERATED):
        return None
    if path.startswith(TOP_LEVEL):
        if any(c in path for c in "*?["):
            return None if any(REPO.glob(path)) else "no file matches"
        target = REPO / path
        if not target.exists():
            return "does not exist"
        if test_name and not (target.is_file() and _defines(target, test_name.split("::")[-1].split("[")[0])):
            return f"{target.name} defines no {test_name}"
        return None
    root = path.split("/", 1)[0]
    if path.startswith("placsp_provider/"):
        path, root = path.removeprefix("placsp_provider/"), "placsp_provider"
    elif root not in MODULE_ROOTS or "/" not in path:
        return None
    if path.endswith(".py") or path.endswith("/") or root == "placsp_provider":
        return None if (PACKAGE / path).exists() else "does not exist under provider/placsp_provider/"
    attribute = _ATTRIBUTE.match(path)
    if not attribute:
        return None  # e.g. `dead_letters/_delta_log`: a lake folder, not a module
    module = PACKAGE / f"{attribute['module']}.py"  # spark/routing.stage_page
    if not module.is_file():
        return f"{module.relative_to(REPO)} does not exist"
    if not _defines(module, attribute["name"]):
        return f"{module.relative_to(REPO)} defines no {attribute['name']}"
    return None


def _problems(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    where = doc.relative_to(REPO)
    out = [f"{where}: `{t}`: {why}" for t in code_tokens(text) if (why := problem(t))]
    for path, anchor in link_targets(text):
        target = doc.parent / path if path else doc
        if not target.exists():
            out.append(f"{where}: link ({path}): does not exist from {doc.parent.relative_to(REPO) or '.'}/")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            out.append(f"{where}: link ({path}#{anchor}): {target.relative_to(REPO)} has no such heading")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_every_repository_path_named_in_the_docs_exists(doc: Path) -> None:
    problems = _problems(doc)
    assert not problems, "stale paths:\n" + "\n".join(problems)


def test_the_extractor_flags_a_stale_path_and_leaves_runtime_paths(tmp_path: Path) -> None:
    text = (
        "# A `heading`: its [link](x.md)\n"
        "See `spark/no_such_module.py`, `tests/delta_rs`, `feed/xml.no_such_function`, [x](no-such.md),\n"
        "[y](docs/runbook.md#no-such-heading), [z](#a-heading-its-link) and\n"
        "`spark/routing.py`, `spark/routing.stage_page`, `tests/test_boundaries.py`, `<lake>/bronze/<dataset>/`,\n"
        "`$LAKE/runs/<dataset>/*.json`, `bronze/agregadas/pages/Plataformas….atom`, [ok](docs/runbook.md#spark),\n"
        "`placsp_provider.operators.extract.PlacspExtractOperator(dataset)`, `placsp_provider.spark.routing.Gone`.\n"
        "```bash\ncat tests/never/there.py\n```\n"
    )
    flagged = sorted(t for t in code_tokens(text) if problem(t))
    assert flagged == [
        "feed/xml.no_such_function",
        "placsp_provider.spark.routing.Gone",
        "spark/no_such_module.py",
        "tests/delta_rs",
    ]
    doc = tmp_path / "doc.md"
    doc.write_text(text, encoding="utf-8")
    assert anchors(doc) == {"a-heading-its-link"}
    assert [(p, a) for p, a in link_targets(text) if not (REPO / p).exists()] == [("x.md", ""), ("no-such.md", "")]
    assert [a for p, a in link_targets(text) if p == "docs/runbook.md" and a not in anchors(REPO / p)] == [
        "no-such-heading"
    ]
