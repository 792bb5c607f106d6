"""What is written of a scenario's result into its evidence folder: verdict.json, a failed run's investigation
page (report.html), verdict.txt. Each is a writer, ``writer(result, evidence)``, that the engine is handed and
calls once the run is judged (``harness.engine.judge_run``): the engine makes the ``ScenarioResult`` and renders
nothing itself; the front ends choose the writers (``evidence_writers``) and reuse the text they wrote."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.contract import EvidenceLayout
from harness.limits import FINDINGS_SHOWN
from harness.ndjson import write_json_file
from harness.safe_files import write_file

if TYPE_CHECKING:
    from harness.results.scenario_result import ScenarioResult

# a writer of one judged run: the result, and the evidence it was judged from (harness.evidence.Evidence)
ResultWriter = Callable[["ScenarioResult", Any], None]

REPORT_ERROR_FILE = "report.html.error"


def write_verdict_json(result: ScenarioResult, evidence: Any) -> None:
    """verdict.json: the whole result as data (``ScenarioResult.to_dict``), what ``report`` reads back; written an
    operation at a time, never the whole document in memory."""
    write_json_file(EvidenceLayout(result.evidence_dir).verdict_json, result.to_dict(streamed=True))


def write_investigation_page(result: ScenarioResult, evidence: Any) -> None:
    """A failing run's report.html; a page that cannot be made costs the run nothing else: the verdict is
    already on disk, the text follows, and why the page is missing is kept beside them."""
    if result.passed:
        return
    from harness.html_report import write_result_report

    try:
        write_result_report(result, evidence)
    except Exception:  # noqa: BLE001 - the page is a view of the verdict, never a reason to lose it
        import traceback

        write_file(result.evidence_dir / REPORT_ERROR_FILE, traceback.format_exc())


class VerdictText:
    """verdict.txt: the result's text report (``report.render_result``, the default number of findings shown in
    full), rendered once; ``text_for`` hands the same text to the front end that shows it, rather than rendering
    it again."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.result: ScenarioResult | None = None  # whose text it is (one writer may serve several runs)

    def __call__(self, result: ScenarioResult, evidence: Any) -> None:
        from harness.report import render_result

        self.text, self.result = render_result(result), result
        write_file(EvidenceLayout(result.evidence_dir).verdict_text, self.text + "\n")

    def text_for(self, result: ScenarioResult, shown: int | None = None) -> str:
        """The text report of ``result`` with ``shown`` findings in full: the one written, when it says as much
        (a passed run whose folder was not kept wrote none: rendered here)."""
        written = self.text if self.result is result else None
        if written is not None and (FINDINGS_SHOWN if shown is None else shown) == FINDINGS_SHOWN:
            return written
        from harness.report import render_result

        return render_result(result, shown=shown)


def evidence_writers(text: VerdictText | None = None) -> list[ResultWriter]:
    """The evidence folder's writers, in order: verdict.json, a failed run's page, then verdict.txt (which names
    the page, so it comes after it). ``text``: the front end's own ``VerdictText``, to reuse what it rendered."""
    return [write_verdict_json, write_investigation_page, text or VerdictText()]
