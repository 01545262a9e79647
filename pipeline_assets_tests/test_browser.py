"""What a newcomer sees: ``make dev`` on a free port, looked at in a real headless Chromium.

The test starts ``make dev`` exactly as the README says (with ``PORT``, and with
``DAGSTER_HOME`` and ``PIPELINE_DATA_DIR`` under tmp_path so nothing is written in the
checkout), waits over GraphQL until the sensors have loaded the demo and built its days,
then opens the UI in Debian's ``chromium`` driven by selenium through ``chromedriver``
and asserts what a user must see, after dismissing Dagster's welcome pop-up:

1. the catalog lists the three assets ``orders``, ``paid_orders``, ``daily_revenue``;
2. *daily_revenue → Overview → Metadata → Plots* opens in partition mode with the plots
   ``orders`` and ``revenue`` drawn (data points on the canvas, not the placeholder), and
   *paid_orders* shows its ``rows`` per day the same way;
3. *Automation* shows ``daily_schedule``, ``new_orders_sensor`` and
   ``paid_orders_refresh_sensor`` switched on;
4. a partition range of ``paid_orders`` + ``daily_revenue`` chosen in the *Materialize*
   dialog and launched as a backfill completes as exactly one successful run, whose days
   get one manifest;
5. the README's demo lines, typed as printed: 105 paid ``yesterday 20:00`` moves the
   watermark to that stamp, 186 at ``-2d`` reaches its day's file by itself while the
   watermark stays, and ``pipeline-assets verify`` says all agree.

With ``PIPELINE_SCREENSHOTS_DIR`` set (``make screenshots`` sets it to docs/images) it
also saves the pages it looked at as PNGs there; a normal run writes nothing.

Chromium is a Debian package (``chromium``, ``chromium-driver``) that ``.ci/run``
installs; without it the test skips on a laptop and fails in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pipeline_assets.core.table import ORDERS

from .devserver import (
    BIN,
    CALLERS_SETTINGS,
    ROOT,
    RUNS_QUERY,
    DevServer,
    clean_env,
    committed_ids,
    idle,
    launch,
    location_loaded,
    manifests,
    run_errors,
    running,
)
from .support import free_port, unavailable

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.xdist_group("stack-2")]

# Debian's packages, found on PATH (never a downloaded browser)
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1440,1000",
    "--hide-scrollbars",
]
ASSETS = ["daily_revenue", "orders", "paid_orders"]
AUTOMATIONS = ["daily_schedule", "new_orders_sensor", "paid_orders_refresh_sensor"]
SCREENSHOTS = os.environ.get("PIPELINE_SCREENSHOTS_DIR")

PARTITION_STATS = """
query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename
    ... on AssetNode { partitionStats { numMaterialized numPartitions } } } }
"""
BACKFILLS = """
{ partitionBackfillsOrError { __typename
    ... on PartitionBackfills { results { id status partitionNames } } } }
"""

# How many pixels of the plot's line colour a canvas holds: the axes and the grid are
# grey, the placeholder draws nothing, a plotted series is saturated.
COLOURED_PIXELS = """
const canvas = arguments[0];
const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
let n = 0;
for (let i = 0; i < data.length; i += 4) {
  const [r, g, b, a] = [data[i], data[i + 1], data[i + 2], data[i + 3]];
  if (a > 128 && Math.max(r, g, b) - Math.min(r, g, b) > 90) n++;
}
return n;
"""
# The plot titles above each canvas, in order.
PLOT_TITLES = """
return [...document.querySelectorAll('canvas')].map(canvas => {
  let el = canvas;
  while (el && !(el.innerText || '').trim()) el = el.parentElement;
  return el ? el.innerText.trim().split('\\n')[0] : null;
});
"""
# Whether the on/off switch in the row of each named automation is on.
SWITCHED_ON = """
return arguments[0].map(name => {
  const label = [...document.querySelectorAll('a, span, div')]
    .find(el => el.children.length === 0 && el.textContent.trim() === name);
  let row = label;
  while (row && row.querySelectorAll('input[type=checkbox]').length < 2) row = row.parentElement;
  if (!row) return null;
  const boxes = row.querySelectorAll('input[type=checkbox]');
  return boxes[boxes.length - 1].checked;
});
"""


def _chromium_missing() -> str | None:
    for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)):
        if path is None:
            return f"{name} is not on PATH (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the dev extra has it)"
    return None


@pytest.fixture
def browser():
    problem = _chromium_missing()
    if problem:
        unavailable(problem, ci_hint="CI must run the browser test (.ci/run installs it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="pipeline-assets-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def make_dev(tmp_path: Path):
    """``make dev PORT=…`` from the checkout, its home and data under tmp_path."""
    home, data = tmp_path / "home", tmp_path / "data"
    env = clean_env(
        CALLERS_SETTINGS
        + ("LOOKBACK_DAYS", "PARTITIONS_START", "RECONCILE_DAYS", "MAKEFLAGS", "MFLAGS"),
        DAGSTER_HOME=str(home),
        PIPELINE_DATA_DIR=str(data),
    )
    port = free_port()
    server = launch(
        ["make", "--no-print-directory", "dev", f"PORT={port}", f"VENV={BIN.parent}"],
        ROOT,
        env,
        tmp_path / "make-dev.log",
        home,
        data,
        port,
    )
    with running(server):
        yield server


class Page:
    """The browser on the dev server, with polling waits and optional screenshots."""

    def __init__(self, driver, base: str):
        self.driver = driver
        self.base = base

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def wait(self, what: str, probe, timeout: float = 90):
        from selenium.common.exceptions import WebDriverException

        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                result = probe()
            except WebDriverException as exc:  # the page re-rendered under us
                result, last = None, exc
            if result:
                return result
            time.sleep(0.5)
        self.shot(f"failed-{what.replace(' ', '-')[:40]}")
        raise AssertionError(
            f"the page never showed {what} within {timeout:.0f} s "
            f"(last error: {last!r}); url {self.driver.current_url}"
        )

    def xpath(self, expression: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.XPATH, expression)

    def button(self, text: str):
        return self.xpath(f"//button[normalize-space()='{text}']")

    def click_button(self, text: str, timeout: float = 60) -> None:
        buttons = self.wait(
            f"a {text!r} button",
            lambda: [b for b in self.button(text) if b.is_displayed() and b.is_enabled()],
            timeout,
        )
        buttons[0].click()

    def text(self) -> str:
        return self.driver.find_element("tag name", "body").text

    def shot(self, name: str) -> None:
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


def settled(server: DevServer, days: int) -> bool:
    """Every demo day built by the sensors, and nothing running."""
    for asset in ("paid_orders", "daily_revenue"):
        node = server.graphql(PARTITION_STATS, {"key": {"path": [asset]}})["assetNodeOrError"]
        if node["__typename"] != "AssetNode" or node["partitionStats"] is None:
            return False
        if node["partitionStats"]["numMaterialized"] < days:
            return False
    return idle(server)


def demo_days(data: Path) -> list[str]:
    with sqlite3.connect(data / "app.db") as conn:
        rows = conn.execute("SELECT DISTINCT substr(updated_at, 1, 10) FROM orders").fetchall()
    return sorted(day for (day,) in rows)


def test_the_ui_tells_the_story(make_dev: DevServer, browser):
    server = make_dev
    server.wait("code location loaded", lambda: location_loaded(server), 240, no_failed_runs=False)
    days = demo_days(server.data)
    assert len(days) >= 28, days  # four weeks, ending yesterday, 101-106 among them
    server.wait(
        "the demo's days built by the sensors", lambda: settled(server, len(days)), 420, every=2
    )
    page = Page(browser, server.url.removesuffix("/graphql"))

    # 1. the catalog, after the welcome pop-up (shown once per DAGSTER_HOME)
    page.open("/assets")
    page.click_button("Skip", timeout=60)
    page.wait("the welcome pop-up gone", lambda: not page.button("Skip"), 30)
    for name in ASSETS:
        page.wait(
            f"asset {name}",
            lambda name=name: [
                a for a in page.xpath(f"//a[@href='/assets/{name}']") if a.is_displayed()
            ],
        )
    page.shot("catalog")

    # 2. the plots over days
    for asset, titles in (("daily_revenue", ["orders", "revenue"]), ("paid_orders", ["rows"])):
        page.open(f"/assets/{asset}")
        page.click_button("Plots")
        page.wait(
            f"{asset}'s plots by partition",
            lambda: "When graphing values by partition" in page.text(),
        )
        page.wait(
            f"{asset}'s plots {titles}",
            lambda titles=titles: set(titles) <= set(page.driver.execute_script(PLOT_TITLES)),
        )

        def drawn(titles=titles) -> dict | None:
            canvases = page.driver.find_elements("tag name", "canvas")
            named = dict(zip(page.driver.execute_script(PLOT_TITLES), canvases, strict=True))
            pixels = {t: page.driver.execute_script(COLOURED_PIXELS, named[t]) for t in titles}
            return pixels if all(n > 150 for n in pixels.values()) else None

        pixels = page.wait(f"{asset}'s data points", drawn)
        assert "Asset plots are automatically generated" not in page.text()
        print(f"{asset}: coloured pixels per plot {pixels}")
        named = dict(
            zip(
                page.driver.execute_script(PLOT_TITLES),
                page.driver.find_elements("tag name", "canvas"),
                strict=True,
            )
        )
        page.driver.execute_script(
            "arguments[0].scrollIntoView({block: 'center'})", named[titles[-1]]
        )
        page.shot(f"{asset.replace('_', '-')}-plots")

    # the story of the first load, as the orders asset's events tell it
    page.open("/assets/orders")
    page.wait("orders' Events tab", lambda: page.xpath("//a[normalize-space()='Events']"))[
        0
    ].click()
    page.wait(
        "the load's metadata",
        lambda: "days_touched" in page.text() and "watermark_after" in page.text(),
        60,
    )
    page.shot("orders-materialization")

    # 3. the schedule and both sensors, running
    page.open("/automation")
    page.wait(
        "the automations switched on",
        lambda: page.driver.execute_script(SWITCHED_ON, AUTOMATIONS) == [True] * 3,
        120,
    )
    page.shot("automation")

    # 4. a partition range launched from the Materialize dialog: one backfill, one run
    before = set(manifests(server.data))
    chosen = days[-5:-2]
    page.open("/assets")
    for name in ("paid_orders", "daily_revenue"):
        box = page.wait(
            f"the checkbox of {name}",
            lambda name=name: page.driver.find_elements(
                "css selector", f"[data-testid='checkbox-{name}']"
            ),
        )[0]
        page.driver.find_element("css selector", f"label[for='{box.get_attribute('id')}']").click()
        page.wait(f"{name} selected", box.is_selected, 10)
    page.wait(
        "the Materialize selected button",
        lambda: page.xpath("//button[contains(normalize-space(), 'Materialize selected')]"),
    )[0].click()
    field = page.wait(
        "the partition selection",
        lambda: page.driver.find_elements(
            "css selector",
            "input[placeholder='No matching partitions'], "
            "input[placeholder='Select a partition or create one']",
        ),
    )[0]
    field.click()
    field.send_keys(f"[{chosen[0]}...{chosen[-1]}]")
    from selenium.webdriver.common.keys import Keys

    field.send_keys(Keys.ENTER)
    page.wait("3 partitions selected", lambda: "3 partitions" in page.text(), 30)
    page.shot("materialize-range")
    page.click_button("Launch backfill")

    def launched() -> dict | None:
        found = server.graphql(BACKFILLS)["partitionBackfillsOrError"]["results"]
        return found[0] if found else None

    backfill = server.wait("the backfill registered", launched, 60)
    assert sorted(backfill["partitionNames"]) == chosen

    def backfill_runs() -> list[dict]:
        found = server.graphql(
            RUNS_QUERY, {"filter": {"tags": [{"key": "dagster/backfill", "value": backfill["id"]}]}}
        )
        return found["runsOrError"]["results"]

    def done() -> bool:
        results = backfill_runs()
        statuses = [r["status"] for r in results]
        assert "FAILURE" not in statuses, run_errors(server, [r["runId"] for r in results])
        return bool(statuses) and set(statuses) == {"SUCCESS"}

    server.wait("the backfill's run done", done, 300, every=2)
    assert len(backfill_runs()) == 1  # a partition range is one run
    server.wait(
        "the backfill completed",
        lambda: launched()["status"] in ("COMPLETED", "COMPLETED_SUCCESS"),
        120,
        every=2,
    )
    new = [m for name, m in manifests(server.data).items() if name not in before]
    assert [m["days_written"] for m in new if set(m["days_written"]) & set(chosen)] == [chosen]

    page.open(f"/runs/b/{backfill['id']}")
    page.wait(
        "the backfill's page: succeeded, 3 of 3 partitions of both assets",
        lambda: "Succeeded" in page.text() and page.text().count("100% completed") == 2,
        60,
    )
    page.shot("backfill")
    print(json.dumps({"backfill": backfill["id"], "days": chosen}))

    # 5. the README's demo lines, typed as printed, tell the story on today's dates
    readme_story(server)


def cli(server: DevServer, *argv: str) -> str:
    done = subprocess.run(
        [str(BIN / "pipeline-assets"), *argv],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def readme_story(server: DevServer) -> None:
    """105 paid "yesterday 20:00" moves the watermark; 186 at -2d is caught by the
    lookback, the watermark stays, and exactly their days are rebuilt; verify agrees."""
    from pipeline_assets.core.db.engines import make_engine
    from pipeline_assets.core.sensing import read_watermark
    from pipeline_assets.core.times import UTC, to_instant

    warehouse = make_engine(f"sqlite:///{server.data / 'warehouse.db'}", role="warehouse")
    try:
        before = read_watermark(warehouse, spec=ORDERS)
        out = cli(
            server,
            "demo",
            "set",
            "105",
            "--status",
            "paid",
            "--amount",
            "22.00",
            "--updated-at",
            "yesterday 20:00",
        )
        stamp_105 = out.split()[-1]  # "order 105 updated: paid 22.00 <the resolved stamp>"
        assert stamp_105.endswith("T20:00:00") and to_instant(stamp_105, UTC) > before
        server.wait(
            "the watermark at 105's stamp",
            lambda: read_watermark(warehouse, spec=ORDERS) == to_instant(stamp_105, UTC),
            180,
            every=1,
        )
        out = cli(
            server,
            "demo",
            "set",
            "186",
            "--status",
            "paid",
            "--amount",
            "30.00",
            "--updated-at",
            "-2d",
        )
        stamp_186 = out.split()[-1]
        day_105, day_186 = stamp_105[:10], stamp_186
        server.wait(
            "order 186 in its day's committed file",
            lambda: 186 in (committed_ids(server.data, day_186) or []),
            180,
            every=1,
        )
        server.wait("nothing running", lambda: idle(server), 120)
        assert read_watermark(warehouse, spec=ORDERS) == to_instant(
            stamp_105, UTC
        )  # never moved back
        assert 105 in committed_ids(server.data, day_105)
        shown = json.loads(cli(server, "watermark", "show"))["watermark"]
        assert shown == to_instant(stamp_105, UTC).isoformat()
        assert "OK: source, warehouse and committed day files agree" in cli(server, "verify")
    finally:
        warehouse.dispose()
