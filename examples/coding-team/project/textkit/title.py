SMALL = {"a", "an", "and", "of", "the", "to"}


def title_case(text: str) -> str:
    """Capitalise words except small ones (unless first)."""
    return text.title()
