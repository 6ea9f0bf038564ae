import json

from typer.testing import CliRunner

from pamir.cli import app


def test_dataset_stats_json(corel_root):
    res = CliRunner().invoke(app, ["dataset", "stats", f"corel5k:{corel_root}", "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.output)
    assert stats["vocabulary"] == 179
    assert stats["test"] == {"pictures": 499, "queries": 2241, "relevant_per_query": 2.37,
                             "words_per_query": 2.51, "single_word_queries": 179}
    assert set(stats) >= {"train", "valid", "test"}


def test_dataset_stats_bad_table_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(app, ["dataset", "stats", str(tmp_path / "none.tsv")])
    assert res.exit_code == 2
    assert "captions table not found" in res.output
