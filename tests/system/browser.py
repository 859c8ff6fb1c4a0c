"""Debian's Chromium, headless, driven by Playwright (`executable_path`: no browser download)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise RuntimeError("Debian's chromium is not installed: `make system-test` installs it")
    return path


@contextmanager
def airflow_page(base_url: str, username: str, password: str, screenshots: Path) -> Iterator[Any]:
    """A logged-in page of the Airflow UI (SimpleAuthManager's login form, as a person fills it)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Chromium's sandbox needs a non-root user; the test runs as root on CI machines.
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=args)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base_url}/")
            page.wait_for_selector("input[name=username]")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", password)
            page.keyboard.press("Enter")
            page.wait_for_url(lambda url: "/auth/login" not in url and "/login" not in url)
            yield page
        except Exception:
            page.screenshot(path=str(screenshots / "failure.png"), full_page=True)
            (screenshots / "failure.html").write_text(page.content())
            raise
        finally:
            browser.close()
