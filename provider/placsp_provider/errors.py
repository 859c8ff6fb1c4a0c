"""The handful of domain exceptions. Messages name the dataset, the URL or file, the stage and why."""

from __future__ import annotations

from typing import Any

from placsp_provider.untrusted import printable, printable_lines


class PlacspError(Exception):
    """Base class: everything the provider raises on purpose.

    The message is made printable here (`untrusted.printable`), once for every raise: a reason phrase,
    a file name or an lxml message quoting a record travels into task failures, trigger events,
    notifier alerts and CLI errors, and must not repaint a terminal or forge a log line on the way.
    Escaping is idempotent (an escape such as `\\x1b` is itself printable), so a message that wraps
    another one (`PlacspError(f"...: {err}")`) is not escaped twice.

    A message is one line. A subclass whose message is several lines the provider writes itself sets
    `multiline = True`: its line breaks are kept, so each line must be built from printable parts
    (every other control character is still escaped).
    """

    multiline = False

    def __init__(self, *args: object) -> None:
        if len(args) == 1:
            args = (printable_lines(args[0]) if self.multiline else printable(args[0]),)
        super().__init__(*args)


class FeedError(PlacspError):
    """The source could not be read: HTTP failures, refused redirects, non-feed bodies, limits."""

    def __init__(self, dataset: str, url: str, reason: str) -> None:
        self.dataset = dataset
        self.url = url
        self.reason = reason
        super().__init__(f"dataset {dataset}: {url}: {reason}")


class PageTooLargeError(FeedError):
    """A page or archive exceeded the configured size limit; it was not landed."""


class PageGoneError(FeedError):
    """The site answered 404 Not Found: the page or archive is not (or no longer) published."""


class UntrustedUrlError(FeedError):
    """A URL (a link in a page, a redirect) that is not on the configured site: refused, never fetched."""


class BronzePageError(PlacspError):
    """A landed Bronze page could not be read back for parsing (removed, unreadable, not a POSIX path),
    or its parsed rows could not be staged for the Silver write."""

    def __init__(self, dataset: str, file: str, reason: str, *, stage: str = "parse") -> None:
        self.dataset = dataset
        self.file = file
        self.reason = reason
        self.stage = stage
        super().__init__(f"dataset {dataset}: {file}: stage {stage}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a parse worker, re-raised by its parent
        return _bronze_page_error, (self.dataset, self.file, self.reason, self.stage)


def _bronze_page_error(dataset: str, file: str, reason: str, stage: str) -> BronzePageError:
    return BronzePageError(dataset, file, reason, stage=stage)


class ConfigError(PlacspError, ValueError):
    """A configuration value that cannot work; raised before any network or Spark work."""
