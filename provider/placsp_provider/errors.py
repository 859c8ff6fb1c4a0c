"""The handful of domain exceptions. Messages name the dataset, the URL or file, the stage and why."""

from __future__ import annotations


class PlacspError(Exception):
    """Base class: everything the provider raises on purpose."""


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
        super().__init__(f"dataset {dataset}: {file}: stage {stage}: {reason}")


class ConfigError(PlacspError, ValueError):
    """A configuration value that cannot work; raised before any network or Spark work."""
