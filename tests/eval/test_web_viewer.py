"""``viewer=web`` in a real browser: the system Chromium driven by Playwright (software WebGL), on loopback.

Loads the page, checks that the scene holds the robot and the ghost (the scene tree on the server, and
their colours in the rendered canvas), switches motion in the page's selector, and checks that the
displayed motion name and the robot's pose change. Skips only where Chromium or Playwright is missing
(``.ci/run`` installs Chromium; the README says how).
"""

import shutil
import time

import numpy as np
import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--headless",
                 "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="no system Chromium (apt-get install -y chromium; .ci/run installs it)")


def colour_masks(png: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Robot (orange) and ghost (blue) pixels of a screenshot."""
    import io

    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    robot = (r > 120) & (r - b > 70) & (r - g > 25)
    ghost = (b > 120) & (b - r > 45)
    return robot, ghost


def select_motion(page, name: str, attempts: int = 3) -> None:
    """Pick ``name`` in the page's motion selector until the page shows it. A click that lands while the
    dropdown is still opening can be lost (seen once, in a full-suite run), so the pick is retried."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        page.locator("input[role=combobox]:visible").first.click()
        page.get_by_role("option", name=name, exact=True).click()
        try:
            page.wait_for_function(f"document.body.innerText.includes('motion: {name}')", timeout=30_000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")


def test_web_viewer_in_chromium(player):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
    from simppo.eval.web import GHOST_COLOR, ROBOT_COLOR, WebViewer

    assert ROBOT_COLOR[0] > ROBOT_COLOR[2] and GHOST_COLOR[2] > GHOST_COLOR[0]
    viewer = WebViewer(player, player.env.sim.mj_model, "127.0.0.1", 0)  # the server picks the port
    assert viewer.host == "127.0.0.1" and viewer.port > 0 and viewer.url.endswith(f":{viewer.port}")
    nodes = set(viewer.server.scene._handle_from_node_name)  # the scene tree served to the page
    assert "/robot/pelvis/mesh" in nodes and "/ghost/pelvis/mesh" in nodes
    viewer.start()
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 900, "height": 650})
            page.goto(viewer.url)
            first = player.motion_names[0]
            page.wait_for_function(f"document.body.innerText.includes('motion: {first}')", timeout=90_000)
            # the canvas fades in; wait until both the robot and the ghost are drawn
            deadline = time.monotonic() + 60.0
            while True:
                shot_a = page.screenshot()
                robot_a, ghost_a = colour_masks(shot_a)
                if (robot_a.sum() > 200 and ghost_a.sum() > 200) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert robot_a.sum() > 200, "robot not visible in the page"
            assert ghost_a.sum() > 200, "ghost not visible in the page"
            root_a = player.frame.body_pos[1].copy()

            select_motion(page, "walk")
            time.sleep(1.0)
            robot_b, _ = colour_masks(page.screenshot())
            assert player.frame.motion_name == "walk"
            assert np.linalg.norm(player.frame.body_pos[1] - root_a) > 1e-3  # the robot's pose changed
            changed = (robot_a ^ robot_b).sum()
            assert changed > 100, f"robot pixels barely changed ({changed})"
            browser.close()
    finally:
        viewer.stop()
    assert viewer.frames_shown > 10
