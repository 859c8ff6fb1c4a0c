"""The parser's rules version: which rules rejected a dead letter (its `parser_version` column).

`PARSER_VERSION` changes when a record's verdict can change (a new accepted amount format, a looser
id check, a new limit), and only then: the scheduled reprocessing (`placsp_dead_letter_reprocess`)
replays, without a person, every dead letter an older version rejected, so a version bumped for a
comment would replay the whole backlog for nothing, and a rule changed without a bump would leave
it waiting for a person. A person decides; a test keeps them honest: `RULES_DIGEST` is the digest
of the rule modules' code (comments, docstrings and formatting left out), and
tests/parser/test_parser_version.py fails when the code changes and the digest was not updated,
asking whether the version must go up (decision 0045).
"""

from __future__ import annotations

import ast
import hashlib
from importlib import resources

PARSER_VERSION = 1

# The code that decides a record's verdict: the byte split, the parse, the field reads, the value
# checks, the XML parser's settings and the prolog's refusals; and the size limits (settings.py).
# silver_schema.py (columns, not verdicts) and this module are not among them.
RULE_MODULES = (
    ("placsp_provider.parser", "page_split.py"),
    ("placsp_provider.parser", "page_parser.py"),
    ("placsp_provider.parser", "entry_fields.py"),
    ("placsp_provider.parser", "validation.py"),
    ("placsp_provider.feed", "xml.py"),
    ("placsp_provider.feed", "prolog.py"),
)
RULE_LIMITS = ("MAX_NODES_PER_RECORD", "MAX_NODES_PER_PAGE", "MAX_NAMESPACE_DECLARATIONS", "XML_MAX_DEPTH")

# sha256 of RULE_MODULES' code as `rules_digest` reads it, when PARSER_VERSION was last decided.
RULES_DIGEST = "77f2885606dfee12dc124969684b3ac2ab259299daa9b7ee86742ae64f6ab362"


def rules_digest() -> str:
    """sha256 over each rule module's name and its code without docstrings, comments or layout
    (`ast.unparse` of the tree with the docstrings removed), then the limits' values."""
    from placsp_provider import settings

    digest = hashlib.sha256()
    for package, name in RULE_MODULES:
        tree = ast.parse(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and _is_docstring(body[0]):
                node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
        digest.update(f"{package}/{name}".encode() + b"\0" + ast.unparse(tree).encode() + b"\0")
    digest.update(repr([getattr(settings, limit) for limit in RULE_LIMITS]).encode())
    return digest.hexdigest()


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
