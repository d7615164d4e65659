"""The example's ground truth, run by the leader itself: pricing.json must hold one row
per vendor page, each price exactly as its page publishes it (null when it does not)."""

import json
import re
import sys
from pathlib import Path

PRICE = re.compile(r"^price:\s*(?:\$|USD\s*)?([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE | re.MULTILINE)

expected = {}
for page in sorted(Path("vendors").glob("*.txt")):
    found = PRICE.search(page.read_text(encoding="utf-8"))
    expected[page.stem] = float(found.group(1)) if found else None

if not Path("pricing.json").is_file():
    sys.exit("pricing.json was not written")
rows = json.loads(Path("pricing.json").read_text(encoding="utf-8"))
got = {str(row["vendor"]).lower(): row["monthly_usd"] for row in rows}
got = {k: (float(v) if v is not None else None) for k, v in got.items()}
if got != expected:
    sys.exit(f"pricing.json does not match the pages:\n  got      {got}\n  expected {expected}")
print(f"pricing.json: {len(rows)} vendors, every price as published")
