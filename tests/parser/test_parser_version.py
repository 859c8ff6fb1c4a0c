"""The parser's rules version (`parser/version.py`, decision 0045): it records which rules rejected a
dead letter, and the scheduled reprocessing replays what an older version rejected."""

from __future__ import annotations

import pytest

from placsp_provider.parser import version

pytestmark = pytest.mark.unit


def test_the_rules_digest_is_the_one_the_parser_version_was_decided_for() -> None:
    assert version.rules_digest() == version.RULES_DIGEST, (
        "the parser's rule modules changed (parser/version.py RULE_MODULES). If a record's verdict can "
        "change (something rejected before is accepted now, or the other way round), add 1 to "
        "PARSER_VERSION: the scheduled reprocessing then replays what the older version rejected. Either "
        f"way set RULES_DIGEST = {version.rules_digest()!r}."
    )


def test_the_digest_ignores_comments_docstrings_and_layout_but_not_code(tmp_path, monkeypatch) -> None:
    from importlib import resources

    sources = {
        name: resources.files(pkg).joinpath(name).read_text(encoding="utf-8") for pkg, name in version.RULE_MODULES
    }

    class Folder:
        def __init__(self, texts: dict[str, str]) -> None:
            self.texts = texts

        def joinpath(self, name: str):
            return tmp_path / name

    def digest_of(texts: dict[str, str]) -> str:
        for name, text in texts.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        monkeypatch.setattr(resources, "files", lambda _: Folder(texts))
        return version.rules_digest()

    # The modules' real text, read from a copy: the copy is what is digested.
    assert digest_of(sources) == version.RULES_DIGEST
    split = "page_split.py"
    restyled = dict(
        sources, **{split: "# a comment\n\n" + sources[split].replace('"""', '"""Reworded. ', 1) + "\n\n# end\n"}
    )
    assert digest_of(restyled) == version.RULES_DIGEST
    parser = "validation.py"
    changed = dict(sources, **{parser: sources[parser] + "\nEXTRA_RULE = 1\n"})
    assert digest_of(changed) != version.RULES_DIGEST
    from placsp_provider import settings

    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", settings.MAX_NODES_PER_RECORD + 1)
    assert digest_of(sources) != version.RULES_DIGEST  # a limit is a rule too
