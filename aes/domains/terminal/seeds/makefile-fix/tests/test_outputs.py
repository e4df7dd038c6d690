"""Runs make on fresh copies of /app/site; each test is one part of the reward."""

import shutil
import subprocess

import pytest

ABOUT_HTML = (
    "<html><head><title>About Lantern</title></head><body>\n"
    "<h1>About Lantern</h1>\n"
    "<p>Lantern was started in 2024 by two librarians.</p>\n"
    "<p>It has no dependencies beyond Python.</p>\n"
    "</body></html>\n"
)


@pytest.fixture
def site(tmp_path):
    dst = tmp_path / "site"
    shutil.copytree("/app/site", dst, ignore=shutil.ignore_patterns("build"))
    return dst


def make(site, *args):
    return subprocess.run(["make", *args], cwd=site, capture_output=True, text=True, timeout=60)


def test_make_succeeds_from_clean_checkout(site):
    assert make(site).returncode == 0


def test_all_pages_built(site):
    make(site)
    assert all((site / "build" / f"{name}.html").is_file() for name in ("about", "contact", "index"))


def test_page_rendered_by_tool(site):
    make(site)
    assert (site / "build" / "about.html").read_text() == ABOUT_HTML


def test_manifest(site):
    make(site)
    assert (site / "build" / "manifest.txt").read_text().split() == ["about.html", "contact.html", "index.html"]


def test_second_run_is_up_to_date(site):
    assert make(site).returncode == 0
    assert make(site, "-q").returncode == 0


def test_new_page_is_built_and_listed(site):
    assert make(site).returncode == 0
    (site / "pages" / "faq.txt").write_text("FAQ\nNothing asked yet.\n")
    assert make(site).returncode == 0
    assert (site / "build" / "faq.html").is_file()
    assert (site / "build" / "manifest.txt").read_text().split() == [
        "about.html", "contact.html", "faq.html", "index.html"]


def test_clean_removes_build_dir(site):
    assert make(site).returncode == 0
    assert make(site, "clean").returncode == 0
    assert not (site / "build").exists()
