"""The built documentation site: the strict build passes without a warning and publishes the
generated pages; in a browser it opens from disk (``file://``) and from a server, its
navigation and search lead to pages (never to a folder), and at 1,280 px a wide table scrolls
inside its frame while the code in its cells wraps between words only; the results table fits
whole.

One strict build for the module (``mkdocs build --strict -d TMP``, about 10 s). The browser
tests drive Debian's headless Chromium through Playwright and skip with a reason without it.
Pages are loaded with every request off this machine refused (the site works offline).
"""

from __future__ import annotations

import functools
import html.parser
import importlib.util
import os
import re
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1280, 800
OFF_MACHINE = re.compile(r"^https?://(?!127\.0\.0\.1[:/])")
"""Requests the tests refuse: the site must work without the network (fonts and MathJax from a
CDN fall back or stay unrendered; nothing else may need them)."""

# Every inline code word of the page's tables that the browser laid out on two lines.
BROKEN_CODE_WORDS_JS = r"""() => {
  const broken = [];
  for (const code of document.querySelectorAll('.md-typeset table code')) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()]
          .filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""

# Each table's frame: its width, how far it scrolls, and where it and the table end.
TABLE_FRAMES_JS = r"""() => [...document.querySelectorAll('.md-typeset table')].map((t) => {
  const wrap = t.closest('.md-typeset__scrollwrap');
  return {
    headers: [...t.querySelectorAll('thead th')].map((th) => th.textContent.trim()),
    table_right: t.getBoundingClientRect().right,
    wrap_right: wrap ? wrap.getBoundingClientRect().right : null,
    overflow_x: wrap ? getComputedStyle(wrap).overflowX : null,
    scroll_width: wrap ? wrap.scrollWidth : null,
    client_width: wrap ? wrap.clientWidth : null,
  };
})"""


def _load_tables_hook():
    """``docs/hooks/tables.py`` as a module (MkDocs loads hooks by path)."""
    spec = importlib.util.spec_from_file_location("docs_hook_tables", REPO / "docs/hooks/tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> subprocess.CompletedProcess:
    """``make docs``'s build (``mkdocs build --strict``) into a temporary folder, its output
    captured; ``build.args[-1]`` is the folder."""
    folder = tmp_path_factory.mktemp("docs") / "site"
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(folder)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(build) -> Path:
    """The site as ``make docs`` builds it, in a temporary folder."""
    assert build.returncode == 0, build.stdout + build.stderr
    return Path(build.args[-1])


# ---- the strict build ----------------------------------------------------------------------------
def test_strict_build_passes_and_publishes_the_generated_pages(build, site):
    output = build.stdout + build.stderr
    assert "WARNING" not in output, output
    recipes = (site / "reference" / "recipes.html").read_text(encoding="utf-8")
    # (a snake_case name in a table may wrap after its underscores: docs/hooks/tables.py)
    assert "training.metric_for_best_model" in recipes.replace("<wbr>", "")
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "--resume" in cli
    assert (site / "results" / "benchmark-report.html").is_file()
    charts = sorted(p.name for p in (REPO / "benchmarks" / "results").glob("*.png"))
    assert charts, "benchmarks/results/ holds no chart"
    published = site / "assets" / "benchmarks"
    assert [p for p in charts if not (published / p).is_file()] == []


@pytest.fixture(scope="module")
def server(site):
    """``site`` served over HTTP on 127.0.0.1 (as ``python -m http.server`` does); its URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's package) driven by Playwright, one per module."""
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (`make browser` / apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Playwright gives every launch a fresh temporary profile (no --user-data-dir needed).
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A 1,280 x 800 page whose requests off this machine are refused."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.route(OFF_MACHINE, lambda route: route.abort())
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture(params=["file", "http"])
def home(request, site):
    """The site's home page, opened from disk and from a server."""
    if request.param == "file":
        return (site / "index.html").as_uri()
    return request.getfixturevalue("server") + "/"


# ---- links ---------------------------------------------------------------------------------------
class _Links(html.parser.HTMLParser):
    """The ``href`` and ``src`` values of an HTML page."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


def test_every_relative_link_of_the_built_site_names_a_file(site):
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")  # 404: server only
    assert site / "quickstart.html" in pages and site / "reference" / "cli.html" in pages
    to_folders, missing = [], []
    for html_file in pages:
        parser = _Links()
        parser.feed(html_file.read_text(encoding="utf-8"))
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path:  # other sites, #anchors
                continue
            target = (html_file.parent / unquote(parts.path)).resolve()
            where = f"{html_file.relative_to(site)} -> {link}"
            if target.is_dir():
                to_folders.append(where)
            elif not target.is_file():
                missing.append(where)
    assert to_folders == [], f"{len(to_folders)} links to folders, e.g. {to_folders[:5]}"
    assert missing == [], missing[:10]


def test_the_search_index_and_worker_shim_are_published_for_file_urls(site):
    index = (site / "search" / "search_index.js").read_text(encoding="utf-8")
    assert index.startswith("var __index = {")
    shim = site / "javascripts" / "iframe-worker-shim.js"
    assert "window.IFrameWorker" in shim.read_text(encoding="utf-8")
    assert 'src="javascripts/iframe-worker-shim.js"' in (site / "index.html").read_text("utf-8")
    assert "unpkg.com/iframe-worker" not in (site / "index.html").read_text("utf-8")


# ---- the table hook ------------------------------------------------------------------------------
def test_keep_words_whole_wraps_the_breakable_words_of_table_code_only():
    hook = _load_tables_hook()
    page = (
        "<p><code>--split validation</code></p>\n"
        "<table>\n<tr><td><code>hfattn evaluate runs/x --split test</code> and"
        " <code>a&lt;b</code></td><td><code class='highlight'><span>x-y</span></code></td></tr>"
        "\n</table>"
    )
    word = '<span class="keep-word">{}</span>'.format
    assert hook.keep_words_whole(page) == (
        "<p><code>--split validation</code></p>\n"  # outside a table: as it was
        f"<table>\n<tr><td><code>hfattn evaluate {word('runs/x')} {word('--split')} test</code>"
        f" and <code>{word('a&lt;b')}</code></td>"
        "<td><code class='highlight'><span>x-y</span></code></td></tr>\n</table>"
    )
    assert hook.keep_words_whole("<p>no table</p>") == "<p>no table</p>"
    # a snake_case name may wrap after its underscores, inside a kept word too
    assert hook.keep_words_whole(
        "<table><tr><td><code>a_b.json runs/x_y _z __init__</code></td></tr></table>"
    ) == (
        f"<table><tr><td><code>{word('a_<wbr>b.json')} {word('runs/x_<wbr>y')} _z"
        " __init__</code></td></tr></table>"
    )


# ---- in the browser ------------------------------------------------------------------------------
def _heading(page) -> str:
    """The page's ``<h1>`` without its permalink sign."""
    return page.locator("h1").first.inner_text().removesuffix("¶").strip()


def test_navigation_leads_to_pages_from_disk_and_from_a_server(page, home):
    page.goto(home)
    assert _heading(page) == "hfattn"
    nav = page.locator(".md-sidebar--primary")
    steps = [
        ("Quickstart", "quickstart.html", "Quickstart"),
        ("Measured results", "results/index.html", "Measured results"),
        ("Command line", "reference/cli.html", "Command-line reference"),
        ("Home", "index.html", "hfattn"),
    ]
    for link, path, heading in steps:
        nav.get_by_role("link", name=link, exact=True).click()
        page.wait_for_load_state()
        assert page.url.split("#")[0].endswith("/" + path), (link, page.url)
        assert _heading(page) == heading, (link, page.url)  # a page, not a folder listing
        assert page.title() == ("hfattn" if link == "Home" else f"{link} - hfattn")


def test_search_finds_pages_from_disk_and_from_a_server(page, home):
    from playwright.sync_api import expect

    page.goto(home)
    meta = page.locator(".md-search-result__meta")
    page.locator(".md-search__input").click()
    expect(meta).to_have_text("Type to start searching", timeout=15_000)  # the index is loaded
    page.keyboard.type("beam search")
    hits = page.locator(".md-search-result__item")
    expect(hits.first).to_be_visible(timeout=15_000)
    expect(meta).to_contain_text("matching document")
    href = hits.first.locator("a").first.get_attribute("href")
    assert urlsplit(href).path.endswith(".html"), href
    hits.first.locator("a").first.click()
    page.wait_for_load_state()
    assert page.locator("h1").count() == 1 and not _heading(page).startswith("Index of")


@pytest.mark.parametrize(
    "path",
    [
        "results/index.html",
        "results/benchmark-notes.html",
        "reference/recipes.html",
        "reference/cli.html",
        "index.html",
    ],
)
def test_wide_tables_scroll_in_their_frame_and_code_wraps_between_words(page, site, path):
    page.goto((site / path).as_uri())
    frames = page.evaluate(TABLE_FRAMES_JS)
    assert frames, f"{path} has no table"
    for frame in frames:
        assert frame["overflow_x"] in ("auto", "scroll"), frame
        assert frame["wrap_right"] <= WIDTH, frame  # the frame itself is on the page
        wider = frame["table_right"] > frame["wrap_right"] + 1
        assert not wider or frame["scroll_width"] > frame["client_width"], frame
    assert page.evaluate("() => document.documentElement.scrollWidth") <= WIDTH
    assert page.evaluate(BROKEN_CODE_WORDS_JS) == []


# Every cell of the page's first table: its column, whether its content is wider than the cell,
# and where it ends.
CELLS_JS = r"""() => {
  const table = document.querySelector('.md-typeset table');
  const headers = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
  return [...table.querySelectorAll('tr')].flatMap((tr) => [...tr.children].map((cell, i) => ({
    column: headers[i],
    text: cell.textContent.trim().slice(0, 60),
    overflows: cell.scrollWidth > cell.clientWidth + 1,
    right: cell.getBoundingClientRect().right,
  })));
}"""


def test_the_results_table_is_readable_at_1280_px(page, site):
    """At 1,280 px the results table fits its frame, every column in view (the command
    column was cut off at the frame's edge and scrolled sideways), no cell's content wider
    than the cell, and the code in its cells wrapped between words only."""
    page.goto((site / "results" / "index.html").as_uri())
    table = page.locator(".md-typeset table").first
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    assert headers[-1] == "files" and "command" in headers, headers
    wrap = page.locator(".md-typeset__scrollwrap").first
    wrap.scroll_into_view_if_needed()
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "the table scrolls sideways"
    box = wrap.bounding_box()
    cells = page.evaluate(CELLS_JS)
    assert {cell["column"] for cell in cells} == set(headers)
    assert [cell for cell in cells if cell["overflows"]] == []
    assert max(cell["right"] for cell in cells) <= box["x"] + box["width"] + 1 <= WIDTH + 1
    assert page.evaluate(BROKEN_CODE_WORDS_JS) == []
