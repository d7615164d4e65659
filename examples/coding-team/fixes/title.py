SMALL = {"a", "an", "and", "of", "the", "to"}


def title_case(text: str) -> str:
    """Capitalise words except small ones (unless first)."""
    words = text.split()
    return " ".join(
        w.capitalize() if i == 0 or w.lower() not in SMALL else w.lower()
        for i, w in enumerate(words)
    )
