#!/usr/bin/env bash
# Opens the HTML reports phaze writes in a real browser (headless Chromium, Debian's `chromium`) and checks
# that each page loads without errors and that its charts are drawn: every inline SVG has a size, lies within
# the page's width, and holds drawn shapes. Usage:
#   reports_in_browser.sh PHAZE_BINARY SOURCE_DIR [SCREENSHOT_DIR]
# With SCREENSHOT_DIR, a PNG of each page is written there (docs/images/ keeps the ones the README shows).
#
# How: each report is copied as .xhtml with a small script added that measures the page after it loads and
# writes what it measured into the page; `chromium --dump-dom` prints the page, and the measurements are read
# back from it. Read as XHTML, a report that is not well-formed shows Chromium's <parsererror> instead.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PHAZE_BINARY SOURCE_DIR [SCREENSHOT_DIR]" >&2
  exit 2
fi
phaze=$1
src=$2
shots=${3:-}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "chromium not found: install Debian's chromium package (scripts/install-deps.sh does)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
width=1280
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --disable-extensions
  --window-size=${width},1600 --user-data-dir="$work/profile")

# The reports: the co-search's report of a small space (seconds) and the plan report of GPT-3 175B on 64 A100s.
"$phaze" search --spec "$src/docs/examples/my-space.json" --quiet --out "$work/search" >/dev/null ||
  { echo "FAIL  phaze search did not run"; exit 1; }
reports=("search:$work/search/report.html")
if "$phaze" plan --help 2>/dev/null | grep -q -- '--report'; then
  "$phaze" plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --report "$work/plan" \
    >/dev/null ||
    { echo "FAIL  phaze plan --report did not run"; exit 1; }
  reports+=("plan:$work/plan/report.html")
fi

probe='<script type="text/javascript">//<![CDATA[
window.addEventListener("load", function () {
  var out = [], svgNs = "http://www.w3.org/2000/svg", page = document.documentElement.scrollWidth;
  out.push("viewport " + document.documentElement.clientWidth + " page " + page);
  out.push("parsererror " + document.getElementsByTagName("parsererror").length);
  var svgs = document.getElementsByTagNameNS(svgNs, "svg");
  for (var i = 0; i < svgs.length; ++i) {
    if (svgs[i].parentNode && svgs[i].parentNode.namespaceURI === svgNs) continue;
    var r = svgs[i].getBoundingClientRect(), drawn = 0;
    var shapes = svgs[i].querySelectorAll("rect, circle, path, line, polyline, polygon, text");
    for (var k = 0; k < shapes.length; ++k) {
      var b = shapes[k].getBoundingClientRect();
      if (b.width > 0 || b.height > 0) ++drawn;
    }
    out.push("svg " + i + " left " + Math.floor(r.left) + " right " + Math.ceil(r.right) + " width " +
             Math.round(r.width) + " height " + Math.round(r.height) + " drawn " + drawn);
  }
  var pre = document.createElementNS("http://www.w3.org/1999/xhtml", "pre");
  pre.setAttribute("id", "phaze-probe");
  pre.textContent = "\n" + out.join("\n") + "\n";
  document.body.appendChild(pre);
});
//]]></script>'

failed=0
for entry in "${reports[@]}"; do
  name=${entry%%:*}
  page=${entry#*:}
  fail() {
    echo "FAIL  $name report ($page): $1"
    failed=$((failed + 1))
  }
  # The probe goes just before </body>; the copy sits beside the report (same relative links).
  probe_page="$(dirname "$page")/probe.xhtml"
  PROBE=$probe awk '{ i = index($0, "</body>")
    if (i) print substr($0, 1, i - 1) ENVIRON["PROBE"] substr($0, i); else print }' "$page" >"$probe_page"
  "$browser" "${flags[@]}" --virtual-time-budget=5000 --enable-logging=stderr --v=0 --dump-dom \
    "file://$probe_page" >"$work/$name.dom" 2>"$work/$name.log"
  if grep -E -i "uncaught|CONSOLE.*(error|warning)|Failed to load resource" "$work/$name.log" >"$work/$name.errors"; then
    fail "the page logged errors:"
    sed 's/^/      /' "$work/$name.errors"
  fi
  measured=$(sed -n '/<pre id="phaze-probe">/,/<\/pre>/p' "$work/$name.dom")
  if [ -z "$measured" ]; then
    fail "the page did not load (no measurements came back)"
    continue
  fi
  echo "$measured" | sed -e 's/<[^>]*>//g' | grep -E '^(viewport|parsererror|svg) ' | sed "s/^/      $name: /"
  [ "$(echo "$measured" | awk '/^parsererror/ {print $2}')" = "0" ] || fail "the XHTML does not parse"
  viewport=$(echo "$measured" | awk '/^viewport/ {print $2}')
  page_width=$(echo "$measured" | awk '/^viewport/ {print $4}')
  [ "${page_width:-0}" -le "${viewport:-0}" ] || fail "the page is $page_width px wide, wider than the window ($viewport px)"
  charts=$(echo "$measured" | grep -c '^svg ')
  [ "$charts" -ge 1 ] || fail "no chart on the page"
  while read -r _ i _ left _ right _ w _ h _ drawn; do
    [ "$w" -gt 0 ] && [ "$h" -gt 0 ] || fail "chart $i has no size (${w}x${h})"
    [ "$left" -ge 0 ] && [ "$right" -le "$viewport" ] || fail "chart $i spans x $left..$right, outside the window (0..$viewport)"
    [ "$drawn" -ge 10 ] || fail "chart $i draws only $drawn shapes (blank?)"
  done < <(echo "$measured" | grep '^svg ')
  if [ -n "$shots" ]; then
    mkdir -p "$shots"
    "$browser" "${flags[@]}" --window-size=${width},3400 --screenshot="$shots/report-$name.png" "file://$page" \
      >/dev/null 2>&1 || fail "no screenshot"
  fi
  [ "$failed" -eq 0 ] && echo "ok    $name report: loads, $charts charts drawn within ${viewport} px"
done
[ "$failed" -eq 0 ]
