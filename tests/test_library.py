"""pamir as a library: `import pamir` stays light, its names resolve, and the README's "Use
from Python" example runs as written on generated pictures."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import pamir
from pictures import captioned_photos

ROOT = Path(__file__).resolve().parents[1]


def test_import_pamir_loads_nothing_heavy():
    """What keeps `python -c "import pamir"` under 0.3 s: no numpy, numba, torch or scipy
    until a name is used (timed in the report, not here)."""
    code = ("import sys, pamir; print(sorted(m for m in ('numpy', 'scipy', 'numba', 'torch', "
            "'sklearn', 'pamir.system', 'pamir.index') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_every_exported_name_resolves():
    for name in pamir.__all__:
        assert getattr(pamir, name) is not None, name
    assert pamir.PAMIR.__module__ == "pamir.models.pamir"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pamir.nothing  # noqa: B018
    # what a tab completion offers: the library's names, not this module's helpers
    assert {n for n in dir(pamir) if not n.startswith("__")} == set(pamir.__all__)


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    """The example as written, in a folder holding `photos/` and `new.jpg`. Two changes only:
    the query names the generated pictures' words, and fit_system gets small settings (the
    defaults fit three CNN views and a 15-point grid: minutes, not a test's seconds)."""
    from pamir.features import FeatureSettings

    captioned_photos(tmp_path / "photos")
    Image.open(tmp_path / "photos" / "p000.png").convert("RGB").save(tmp_path / "new.jpg")
    monkeypatch.chdir(tmp_path)
    fit = pamir.fit_system
    quick = {"representation": "visterms", "grid": {},
             "feature_settings": FeatureSettings(short_side=40, n_visterms=16, n_colours=8,
                                                 kmeans_iterations=4, colour_max_pictures=36),
             "model_params": {"n_updates": 3_000, "eval_every": 1_000}}
    monkeypatch.setattr(pamir, "fit_system", lambda c, **kw: fit(c, **{**quick, **kw}))
    code = readme_example().replace('"sea sky"', '"red stripes"')
    assert code.count("\n") <= 12  # the example stays short
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out.strip().splitlines()
    # quiet: nothing but the example's own five hits and one annotation
    assert len(out) == 6, out
    hits = [line.split(" ", 1) for line in out[:5]]
    assert all(Path(path).parent == (tmp_path / "photos").resolve() for _, path in hits)
    # p000 is red and striped: the best words for it are those
    words = [w for w, _ in eval(out[5])[0]]  # noqa: S307  the printed list of tuples
    assert set(words[:2]) == {"red", "stripes"}
    first = [int(Path(p).stem[1:]) for _, p in hits]
    # red and striped first (the generated red striped pictures are copies of one another,
    # so search folds them into the first hit: pamir.duplicates.groups)
    assert first[0] % 3 == 0 and (first[0] // 3) % 2 == 0
