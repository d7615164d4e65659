from tenure.store import open_store


def test_sqlite_store_opens_and_records_its_migrations(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    rows = store.db.read("SELECT name FROM migrations")  # type: ignore[attr-defined]
    assert [row[0] for row in rows] == ["001_initial"]
    store.close()
