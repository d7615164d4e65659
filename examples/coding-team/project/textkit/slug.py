def slugify(text: str) -> str:
    """'Hello, World!' -> 'hello-world'"""
    return text.replace(" ", "-")
