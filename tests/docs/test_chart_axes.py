"""Chart axes: a linear axis starts at zero, and an axis that cannot (log) says it is log.

The Connections chart "Producer jobs/s by pool size" was reported with an axis not starting at zero,
so that a 4% difference called noise filled the chart. In this checkout every linear y axis already
asks for zero (``rangemode: tozero``, drawn from 0 in Chromium); what did not hold is that a log
axis, chosen when the medians span 10x or more, said so outside the Peers page.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from docs_synthetic import make_dragonfly_run, make_run

from bench import report
from bench.report.figures import figure


def _charts(tmp_path: Path) -> list[dict]:
    for doc in (make_run(), make_dragonfly_run()):
        path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    ds = report.load(tmp_path)
    out = "\n".join(section(ds, "") for section in report.SECTIONS.values())
    return [json.loads(html.unescape(found)) for found in re.findall(r'data-cv-chart="([^"]*)"', out)]


def test_every_linear_y_axis_starts_at_zero_and_every_log_one_says_log(tmp_path: Path) -> None:
    charts = _charts(tmp_path)
    assert len(charts) >= 10
    for spec in charts:
        axis, title = spec["layout"]["yaxis"], spec["layout"]["title"]["text"]
        if axis.get("type") == "log":
            assert "log" in axis["title"]["text"] or "log" in title, title
        else:
            assert axis.get("rangemode") == "tozero", title


def test_a_log_axis_is_named_in_its_title() -> None:
    assert figure("t", "x", "jobs/s", log_y=True).layout.yaxis.title.text == "jobs/s (log axis)"
    assert figure("t", "x", "jobs/s").layout.yaxis.title.text == "jobs/s"
    assert figure("t", "x", "jobs/s").layout.yaxis.rangemode == "tozero"


def test_every_y_axis_names_what_it_measures_not_only_its_unit(tmp_path: Path) -> None:
    """Tuning's "Jobs promoted per second by batch" read "1/s" on its y axis: a unit alone does
    not say what is counted (jobs? calls?) once the chart is read apart from its title."""
    bare_units = {"1/s", "ms", "s", "us", "B", "count", "ratio", "%"}
    for spec in _charts(tmp_path):
        text = spec["layout"]["yaxis"]["title"]["text"].removesuffix(" (log axis)")
        assert text not in bare_units, (spec["layout"]["title"]["text"], text)


def test_no_axis_is_titled_with_a_metric_s_field_name(tmp_path: Path) -> None:
    """The History page's machine-check chart read 'evalsha c1 ops (calls/s)' on its y axis: the
    result file's field name, where the title says what it is (one EVALSHA at a time)."""
    titles = [spec["layout"][axis].get("title", {}).get("text") or ""
              for spec in _charts(tmp_path) for axis in ("xaxis", "yaxis")]
    assert titles and not [t for t in titles if re.search(r"\bc1\b|\bcN\b|ops \(", t)]
