"""The store's own precision (issue 25), a card per window on the Sessions page: what the prompt
hook injected, the share judged useful, the tokens spent on ignored or wrong ones, how many are
still unjudged, and why none are judged when no backend makes verdicts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentctx.web.html import Safe, tag
from agentctx.web.views.page import number

if TYPE_CHECKING:
    from collections.abc import Mapping


def _card(title: str, p: Mapping[str, Any]) -> Safe:
    share = "—" if p["useful_share"] is None else f"{p['useful_share']:.0%}"
    return tag(
        "article",
        tag("header", tag("h2", title)),
        tag(
            "p",
            tag("strong", share),
            " judged useful",
            class_="total",
            data_share="" if p["useful_share"] is None else str(p["useful_share"]),
        ),
        tag(
            "ul",
            *(
                tag("li", label, tag("span", number(int(p[key])), class_="n"), data_key=key)
                for label, key in (
                    ("injections", "injections"),
                    ("judged", "judged"),
                    ("used", "used"),
                    ("ignored", "ignored"),
                    ("wrong", "wrong"),
                    ("unjudged", "unjudged"),
                )
            ),
            class_="counts",
        ),
        tag(
            "footer",
            tag(
                "span",
                f"{number(int(p['tokens_ignored']))} of {number(int(p['tokens']))} tokens on "
                "ignored or wrong records",
                data_key="tokens_ignored",
            ),
        ),
        class_="card precision",
        data_days=str(p["days"]),
    )


def section(found: Mapping[str, Any], *, filtered: bool = False) -> Safe:
    """The precision section: the 7- and 30-day cards, the judging state, demotions and tuning
    (``filtered``: the page shows one project; these figures are the whole store's)."""
    notes = []
    if found["judging"] != "on":
        notes.append(
            tag("p", f"No verdicts are made: {found['judging']}.", class_="muted", data_judging="")
        )
    demoted = found["demoted"]["records"]
    if demoted:
        notes.append(
            tag(
                "p", f"{demoted} records judged ignored again and again rank lower.", class_="muted"
            )
        )
    for key, t in found["calibration"]["thresholds"].items():
        notes.append(
            tag(
                "p",
                f"{key}: {t['in_use']:g} in use (calibrated {t['tuned']:g} from {t['previous']:g} "
                f"on {t['verdicts']} verdicts; configured {t['configured']:g}).",
                class_="muted",
            )
        )
    return tag(
        "section",
        tag("h2", "Precision of what was injected"),
        tag("p", "Here an injection is one record a prompt brought in (the table below counts "
            "each digest and each prompt that injected as one); they are judged after the "
            "session" + (", in every project." if filtered else "."), class_="muted"),
        tag("div", _card("Last 7 days", found["7d"]), _card("Last 30 days", found["30d"]),
            class_="cards"),
        *notes,
        class_="precision",
    )  # fmt: skip
