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


def test_the_commands_table_is_the_modules_commands():
    """cli.COMMANDS names every command its modules define, each with the start of that
    command's own help, so `pamir --help` (which imports no command module) says what the
    commands say."""
    from pamir.cli import COMMANDS, load_commands

    defined = {}
    for module in dict.fromkeys(m for m, _ in COMMANDS.values()):
        for name, command in load_commands(module).items():
            defined[name] = (module, " ".join((command.help or "").split()))
    assert sorted(defined) == sorted(COMMANDS)
    wrong = [n for n, (module, line) in COMMANDS.items()
             if defined[n][0] != module or not defined[n][1].startswith(line)]
    assert wrong == []


def test_help_lists_every_command_without_importing_them():
    """`pamir --help` lists every command with its line; the command modules stay unimported
    (each is imported when its command runs), and a command's own --help loads it."""
    import os
    import subprocess
    import sys

    from pamir.cli import COMMANDS

    probe = ("import sys; from pamir.cli import main; sys.argv = ['pamir'] + sys.argv[1:]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith('pamir.commands.')))")
    env = {**os.environ, "COLUMNS": "200"}
    run = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True,
                         text=True, check=True, env=env)
    for name, (_, line) in COMMANDS.items():
        assert f" {name} " in run.stdout and line[:60] in run.stdout
    assert run.stdout.splitlines()[-1] == "['pamir.commands.common']"
    run = subprocess.run([sys.executable, "-c", probe, "people", "--help"],
                         capture_output=True, text=True, check=True, env=env)
    assert "people [OPTIONS]" in run.stdout
    assert run.stdout.splitlines()[-1] == "['pamir.commands.common', 'pamir.commands.people']"


def test_work_done_once_on_a_machine_is_said_on_the_console_once(capsys):
    """A first `pamir index` makes and checks its int8 networks (under a minute each) and
    says so, once, however often the command line sets its console up."""
    import logging

    from pamir.commands.common import say_once_work

    say_once_work()
    say_once_work()
    logging.getLogger("pamir.once").info("quantizing %s to int8", "the lite0 network")
    assert capsys.readouterr().err.count("quantizing the lite0 network to int8") == 1
