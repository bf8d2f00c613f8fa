"""The report: findings as the text a reader goes through, or as JSON for a tool.

The scanners' findings are data; this is the one place that says how they
read, so ``manage.py oximg_migration_scan`` only chooses the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django_oximg.migration_scan.findings import (
    EDIT,
    UNCHANGED,
    UNSUPPORTED,
    VERDICTS,
    Finding,
    NotScanned,
)

#: The longest code a report shows whole. One tag or variable may hold thousands
#: of filters, each its own finding whose code is the whole token: shown whole
#: each time, a line of n characters would make a report of n * n. Real tags are
#: far shorter, and the path and line say where the whole one is.
LONGEST_CODE = 400


def summary(findings: Iterable[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for finding in findings:
        counts[finding.verdict] += 1
    return counts


def text_report(
    findings: list[Finding],
    not_scanned: Sequence[NotScanned] = (),
    skipped: Sequence[NotScanned] = (),
) -> str:
    """The findings as plain text, one place after another, and their counts.

    Then the files that could not be scanned and those skipped, each with
    why: a scan that could not read a file must not read like one that
    found nothing in it.
    """
    lines = []
    for finding in findings:
        lines.append(f"{finding.path}:{finding.line}: {finding.verdict} ({finding.library})")
        lines.append(f"    {shown_code(finding.code)}")
        if finding.replacement:
            lines.append(f"    -> {finding.replacement}")
        if finding.advice:
            lines.append(f"    {finding.advice}")
    if findings:
        counts = summary(findings)
        places = "1 place" if len(findings) == 1 else f"{len(findings)} places"
        lines.append(
            f"{places}: {counts[UNCHANGED]} unchanged, {counts[EDIT]} to edit, "
            f"{counts[UNSUPPORTED]} unsupported"
        )
    else:
        lines.append("No sorl-thumbnail or easy-thumbnails usage found.")
    for entries, what in ((not_scanned, "not scanned"), (skipped, "skipped")):
        if entries:
            lines.append(f"{len(entries)} file{'s' if len(entries) > 1 else ''} {what}:")
            lines.extend(f"    {entry.path}: {entry.reason}" for entry in entries)
    return "\n".join(lines) + "\n"


def json_report(
    findings: list[Finding],
    not_scanned: Sequence[NotScanned] = (),
    skipped: Sequence[NotScanned] = (),
) -> dict[str, Any]:
    return {
        "findings": [
            finding.__dict__
            | {"features": list(finding.features), "code": shown_code(finding.code)}
            for finding in findings
        ],
        "summary": summary(findings),
        "not_scanned": [entry.__dict__ for entry in not_scanned],
        "skipped": [entry.__dict__ for entry in skipped],
    }


def shown_code(code: str) -> str:
    """``code``, or its start and its length when it is longer than :data:`LONGEST_CODE`."""
    if len(code) <= LONGEST_CODE:
        return code
    return f"{code[:LONGEST_CODE]}… ({len(code)} characters)"
