"""``python -m tenure``: the same command as the ``tenure`` script."""

from tenure.console.cli import main

if __name__ == "__main__":
    main()
