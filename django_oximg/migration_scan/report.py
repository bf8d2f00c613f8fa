"""The report: findings as the text a reader goes through, or as JSON for a tool.

The scanners' findings are data; this is the one place that says how they
read, so ``manage.py oximg_migration_scan`` only chooses the format.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django_oximg.migration_scan.findings import EDIT, UNCHANGED, UNSUPPORTED, VERDICTS, Finding


def summary(findings: Iterable[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for finding in findings:
        counts[finding.verdict] += 1
    return counts


def text_report(findings: list[Finding]) -> str:
    """The findings as plain text, one place after another, and their counts."""
    lines = []
    for finding in findings:
        lines.append(f"{finding.path}:{finding.line}: {finding.verdict} ({finding.library})")
        lines.append(f"    {finding.code}")
        if finding.replacement:
            lines.append(f"    -> {finding.replacement}")
        if finding.advice:
            lines.append(f"    {finding.advice}")
    if not findings:
        return "No sorl-thumbnail or easy-thumbnails usage found.\n"
    counts = summary(findings)
    places = "1 place" if len(findings) == 1 else f"{len(findings)} places"
    lines.append(
        f"{places}: {counts[UNCHANGED]} unchanged, {counts[EDIT]} to edit, "
        f"{counts[UNSUPPORTED]} unsupported"
    )
    return "\n".join(lines) + "\n"


def json_report(findings: list[Finding]) -> dict[str, Any]:
    return {
        "findings": [
            finding.__dict__ | {"features": list(finding.features)} for finding in findings
        ],
        "summary": summary(findings),
    }
