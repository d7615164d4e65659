def word_count(text: str) -> int:
    """Words separated by any whitespace."""
    return len(text.split(" "))
