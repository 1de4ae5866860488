"""
Headless Chromium at 1280 px on pages of the built site (``docs/_build/html``): a screenshot of
each, and a list of the code blocks that do not show whole, measured in the browser: a block
whose text is wider than its box is cut (hidden, or seen only by scrolling sideways), as is one
that reaches past the window's right edge.

    .venv/bin/tox -e docs && python docs/screenshots.py OUT_DIR [page.html ...]

Chromium: ``apt-get install chromium``. Not part of CI (no browser there); run it after changing
the CSS (docs/_static/readable.css) or a page with wide blocks.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

HTML = Path(__file__).resolve().parent / "_build" / "html"
PAGES = ["tutorial/multistep-deletion.html", "reference/api.html", "plugins.html"]
WIDTH = 1280

PROBE = """<script>
window.addEventListener('load', () => {
  const cut = [];
  document.querySelectorAll('div.highlight pre, pre.literal-block').forEach((pre, index) => {
    if (pre.scrollWidth > pre.clientWidth + 1) {  // hidden, or only seen by scrolling sideways
      cut.push({index, first: pre.textContent.split('\\n')[0].slice(0, 60),
                text: pre.scrollWidth, box: pre.clientWidth});
    }
    const box = pre.getBoundingClientRect();
    if (box.right > document.documentElement.clientWidth + 1) {
      cut.push({index, first: pre.textContent.split('\\n')[0].slice(0, 60), right: box.right});
    }
  });
  const out = document.createElement('div');
  out.id = 'probe-result';
  out.textContent = JSON.stringify({blocks: document.querySelectorAll('div.highlight pre').length, cut});
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        sys.exit("screenshots: no Chromium (apt-get install chromium)")
    return found


def check(page: str, out: Path) -> list[dict[str, object]]:
    source = HTML / page
    probe = source.with_name(source.stem + ".probe.html")
    probe.write_text(source.read_text().replace("</body>", PROBE + "</body>"))
    try:
        common = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars=false",
                  f"--window-size={WIDTH},900", "--virtual-time-budget=3000"]
        dom = subprocess.run([*common, "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                             check=True, timeout=120).stdout
        found = re.search(r'<div id="probe-result">(.*?)</div>', dom)
        assert found, f"{page}: the probe did not run"
        result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        height = 900
        subprocess.run([*common[:-2], f"--window-size={WIDTH},{height}",
                        f"--screenshot={out / (source.stem + '.png')}", source.as_uri()],
                       capture_output=True, check=True, timeout=120)
    finally:
        probe.unlink()
    print(f"{page}: {result['blocks']} code blocks, {len(result['cut'])} cut", file=sys.stderr)
    return list(result["cut"])


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    cut = {page: check(page, out) for page in (sys.argv[2:] or PAGES)}
    print(json.dumps(cut, indent=2))
    sys.exit(1 if any(cut.values()) else 0)


if __name__ == "__main__":
    main()
