from pathlib import Path

import pytest

from lakehouse.config import load_config, parse_config
from lakehouse.errors import ConfigError


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"views": [{"name": "v.a", "sql": "select 1", "every": "sometimes"}]}, "views.0.every"),
        ({"sources": {"f": {"iceberg": "no_namespace"}}}, "sources.f.iceberg"),
        ({"catalog": {"listen": "8181"}}, "catalog.listen"),
        ({"spark": {"mastr": "local"}}, "spark.mastr"),
        ({"views": [{"name": "v.a", "sql": "s", "refresh": "sometimes"}]}, "views.0.refresh"),
    ],
)
def test_invalid_config_names_the_key(document: dict, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert raised.value.key == key
    assert str(raised.value).startswith(key)


def test_cadences_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.yaml"
    path.write_text(
        "sources:\n  airlines: {delta: data/airlines}\n"
        "views:\n"
        "  - {name: v.a, sql: select 1, every: 30s}\n"
        "  - {name: v.b, sql: select 1, every: '*/5 * * * *'}\n"
        "  - {name: v.c, sql: select 1}\n"
    )
    config = load_config(path)
    assert [v.interval_s for v in config.views] == [30.0, None, None]
    assert config.views[2].every == "on_change"
    assert config.sources["airlines"].delta == str(tmp_path / "data" / "airlines")
    assert config.database_url == f"sqlite:///{tmp_path / 'warehouse' / 'catalog.db'}"
    assert config.catalog_uri == "http://127.0.0.1:8181/iceberg"


def test_duplicate_views_rejected() -> None:
    view = {"name": "v.a", "sql": "select 1"}
    with pytest.raises(ConfigError, match="unique"):
        parse_config({"views": [view, view]})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("views: [\n")
    with pytest.raises(ConfigError, match="YAML"):
        load_config(bad)
