"""`placsp extract` on a full disk: a named one-line error, no partial page, and once space is back
the rerun lands the interval.

The disk is real when this machine allows it: the lake is a size-limited tmpfs mounted in a private
user and mount namespace (`unshare --user --map-root-user --mount`) that lives only as long as the
commands in it, so nothing stays mounted if the test dies; "space comes back" is a remount of that
tmpfs with a larger size, as an operator freeing space would. Where namespaces are not allowed, the
same scenario runs with ENOSPC injected at the file layer (`io.open` in the extraction process,
tests/reliability/enospc.py); the test id says which.

Two fillings: the disk fills while the second page downloads (the first page and the failure
manifest still fit), and the disk is full from the start (not even the manifest fits).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.lake import manifest_path
from tests.reliability import feed_site, harness
from tests.reliability.feed_site import AGR, LANDED, PAGES

pytestmark = [pytest.mark.http, pytest.mark.reliability]

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]  # a private namespace, gone with its processes
SMALL = 64 * 1024  # holds the head page (13 KB) and a manifest, not the second page (247 KB)


@cache
def namespaces_allowed() -> bool:
    probe = [*UNSHARE, "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@dataclass
class Attempt:
    returncode: int
    stderr: str
    lake: Path  # a copy of the lake as the attempt left it


# The whole story runs inside one private namespace; the lake is copied out after each attempt.
SCRIPT = r"""
set -u
mount -t tmpfs -o size="$SIZE" tmpfs "$LAKE"
if [ "$PREFILL" = 1 ]; then cat /dev/zero > "$LAKE/filler" 2>/dev/null; fi
"$@" > "$OUT/first.stdout" 2> "$OUT/first.stderr"; echo $? > "$OUT/first.rc"
cp -a "$LAKE/." "$OUT/first/"
rm -f "$LAKE/filler"; mount -o remount,size=16m "$LAKE"
"$@" > "$OUT/rerun.stdout" 2> "$OUT/rerun.stderr"; echo $? > "$OUT/rerun.rc"
cp -a "$LAKE/." "$OUT/rerun/"
"""


def on_tmpfs(tmp_path: Path, args_for, prefill: bool) -> tuple[Attempt, Attempt]:
    lake, out = tmp_path / "lake", tmp_path / "out"
    for d in (lake, out / "first", out / "rerun"):
        d.mkdir(parents=True)
    env = {**harness.env(), "SIZE": str(SMALL), "LAKE": str(lake), "OUT": str(out), "PREFILL": str(int(prefill))}
    cmd = [*UNSHARE, "sh", "-c", SCRIPT, "sh", *harness.PLACSP, *args_for(lake)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return tuple(  # type: ignore[return-value]
        Attempt(int((out / f"{n}.rc").read_text()), (out / f"{n}.stderr").read_text(), out / n)
        for n in ("first", "rerun")
    )


def injected(tmp_path: Path, args_for, prefill: bool) -> tuple[Attempt, Attempt]:
    """ENOSPC injected at the file layer: namespaces (hence a real size-limited tmpfs) are not allowed."""
    lake = tmp_path / "lake"
    budget = "0" if prefill else str(SMALL)
    wrapper = [sys.executable, "-m", "tests.reliability.enospc", str(lake), budget]
    first = subprocess.run([*wrapper, *args_for(lake)], env=harness.env(), capture_output=True, text=True, timeout=120)
    shutil.copytree(lake, tmp_path / "first", dirs_exist_ok=True)
    rerun = subprocess.run(
        [*harness.PLACSP, *args_for(lake)], env=harness.env(), capture_output=True, text=True, timeout=120
    )
    return Attempt(first.returncode, first.stderr, tmp_path / "first"), Attempt(rerun.returncode, rerun.stderr, lake)


@pytest.mark.parametrize("prefill", [False, True], ids=["fills-during-the-second-page", "full-from-the-start"])
@pytest.mark.parametrize("disk", ["tmpfs", "injected-enospc"])
def test_a_full_disk_gives_a_named_error_no_partial_page_and_the_rerun_lands_everything(
    tmp_path: Path, disk: str, prefill: bool
) -> None:
    if disk == "tmpfs" and not namespaces_allowed():
        pytest.skip("no user+mount namespaces here: the injected-enospc case covers this machine")
    if disk == "injected-enospc" and namespaces_allowed():
        pytest.skip("a real size-limited tmpfs is available here: the tmpfs case covers this machine")
    with LoopbackSite() as site:
        feed_site.serve(site)
        first, rerun = (on_tmpfs if disk == "tmpfs" else injected)(
            tmp_path, lambda lake: feed_site.extract_args(lake, site), prefill
        )

    # A named error, one line, no stack trace: dataset, the page, the stage, the reason.
    assert first.returncode == 2, first.stderr
    assert "Traceback" not in first.stderr, first.stderr
    error = first.stderr.strip().splitlines()[-1]
    failed_page = AGR.head_file if prefill else feed_site.BIG
    assert error.startswith(f"placsp extract: error: dataset {AGR.key}: "), error
    assert failed_page in error and "No space left on device" in error and "stage" in error, error
    # No partial page, no temp file: only whole pages, listed by the manifest when one could be written.
    assert feed_site.assert_only_whole_pages(first.lake) == (set() if prefill else {AGR.head_file})
    assert feed_site.stray_files(first.lake) == []
    if not prefill:
        assert feed_site.listed_files(first.lake) == {
            str(p.relative_to(first.lake)) for p in (first.lake / "bronze" / AGR.key / "pages").iterdir()
        }
    else:
        assert "could not be written either" in error, error

    # Space is back: the rerun lands the whole interval and writes a complete manifest.
    assert rerun.returncode == 0, rerun.stderr
    assert feed_site.assert_only_whole_pages(rerun.lake) == set(LANDED)
    assert feed_site.stray_files(rerun.lake) == []
    manifests = list((rerun.lake / "bronze" / AGR.key / "manifests").glob("*.json"))
    assert [m.name for m in manifests] == [manifest_path(Path("/"), AGR.key, *feed_site.interval()).name]
    manifest = json.loads(manifests[0].read_text())
    assert manifest["complete"] is True
    assert sorted(p["sha256"] for p in manifest["pages"]) == sorted(feed_site.sha256(PAGES[n]) for n in LANDED)
