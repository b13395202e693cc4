"""Small stop-word lists (most frequent function words) for the languages heuristic_v1 knows."""

from __future__ import annotations


def _words(spaced: str) -> frozenset[str]:
    """Space-separated list -> set; keeps the lists readable as running text."""
    return frozenset(spaced.split())


# Lowercase, as `\w+` tokenises them (French elisions split: "l'eau" -> "l", "eau").
STOP_WORDS: dict[str, frozenset[str]] = {
    "en": _words(
        "the be to of and a in that have i it for not on with he as you do at this but his by "
        "from they we say her she or an will my one all would there their what so up out if "
        "about who get which go me when can like no just him know take into your some could "
        "them than then now its also our two how is are was were been has had did does"
    ),
    "de": _words(
        "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch "
        "es an werden aus er hat dass sie nach wird bei einer um am sind noch wie einem über "
        "einen so zum war haben nur oder aber vor zur bis mehr durch man sein wurde sei ich "
        "wir ihr kann können diese dieser"
    ),
    "fr": _words(
        "le la les de des du un une et à en est que qui dans pour pas sur au aux par plus ne "
        "se ce il elle sont avec son sa ses ou mais comme on nous vous leur été être a fait "
        "cette y l d qu c n s j tout aussi dont"
    ),
    "es": _words(
        "de la que el en y a los del se las por un para con no una su al lo como más pero sus "
        "le ya o este sí porque esta entre cuando muy sin sobre también me hasta hay donde "
        "quien desde todo nos durante es son fue ha han ser está están"
    ),
}
