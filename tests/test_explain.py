"""Explanations of every view of a linear model: CNN cells (pamir.features.cnn_maps), visterm
blocks, and the heat map that merges them (pamir.server.explain). The contributions must add up
to the linear score q . W x."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from PIL import Image

from pamir.features.cnn import CNNRepresentation, CNNSettings, prepare_picture
from pamir.features.cnn_maps import (cell_boxes, crop_box, map_contributions, pool, regions,
                                     view_contributions)
from pamir.features.cnn_torch import feature_map
from pamir.features.images import read_bytes
from pamir.server import create_app
from pamir.server.explain import explanation, heat_map
from pamir.system import System
from fakes import DEFAULT, SMALL, VOCAB, default_system
from pictures import disc_picture


pytestmark = pytest.mark.usefixtures("cache_of_the_module")


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    return default_system(tmp_path_factory.mktemp("default"))


def rep_with_stats(settings, rng) -> CNNRepresentation:
    rep = CNNRepresentation(settings, progress=False)
    rep.mean_ = rng.uniform(0, 1, settings.dim).astype(np.float32)
    rep.std_ = rng.uniform(0.5, 2, settings.dim).astype(np.float32)
    return rep


@pytest.mark.parametrize("regions_, power, standardise, l2", [
    (0, 0.5, True, True), (2, 0.5, True, True), (2, 1.0, True, True), (2, 0.25, False, False),
    (0, 1.0, True, False)])
def test_cells_add_up_to_the_views_linear_score(regions_, power, standardise, l2):
    rng = np.random.default_rng(regions_ + int(10 * power))
    settings = CNNSettings(regions=regions_, power=power, standardise=standardise, l2=l2)
    rep = rep_with_stats(settings, rng)
    F = rng.uniform(0, 6, (1280, 7, 5)) * (rng.random((1280, 7, 5)) < 0.3)  # ReLU6: sparse
    F[:10] = 0  # channels that never fire
    g = rng.normal(size=settings.dim)
    x = rep._finish(pool(F, regions_)[None].astype(np.float32), np.ones(1, bool))[0]
    cells, score, mean_term = map_contributions(F, g, rep)
    assert cells.shape == (7, 5)
    assert score == pytest.approx(float(g @ x), abs=1e-4)
    assert cells.sum() == pytest.approx(score, abs=1e-9)
    assert (mean_term == 0) == (not standardise)
    # the contributions are not uniform: the cells with activations carry the score
    assert cells.std() > 1e-3 * np.abs(cells).max()


def test_the_shares_are_the_effects_only_without_power_and_norm():
    """With power 1 and no L2 the score is linear in the map: zeroing a cell moves the score
    by its contribution. With the square root it moves by about half (first-order)."""
    rng = np.random.default_rng(1)
    F = rng.uniform(0.5, 6, (1280, 4, 4))
    g = rng.normal(size=1280)
    for power, factor in ((1.0, 1.0), (0.5, 0.5)):
        rep = rep_with_stats(CNNSettings(power=power, l2=False), np.random.default_rng(2))
        cells, score, _ = map_contributions(F, g, rep)
        G = F.copy()
        G[:, 1, 2] *= 0.999  # a small change of one cell, 0.1 % of its activations
        _, moved, _ = map_contributions(G, g, rep)
        share = cells[1, 2] + (g / rep.std_) @ rep.mean_ / 16  # without the spread mean
        assert score - moved == pytest.approx(factor * 0.001 * share, rel=2e-3)


def test_regions_are_the_trunks():
    assert regions(3, 5, 2)[1:] == [(slice(0, 2), slice(0, 3)), (slice(0, 2), slice(2, 5)),
                                    (slice(1, 3), slice(0, 3)), (slice(1, 3), slice(2, 5))]
    assert regions(4, 4, 0) == [(slice(0, 4), slice(0, 4))]


@pytest.mark.parametrize("flip", [False, True])
def test_the_map_pools_to_the_representations_vector(tmp_path, flip):
    path = tmp_path / "odd.png"
    Image.fromarray(disc_picture(4, (37, 61))).save(path)
    settings = SMALL.replace(regions=2, flip=flip)
    F = feature_map(prepare_picture(read_bytes(path), settings.short_side), settings)
    assert F.shape == (1280, 2, 4)  # 64 x 106 pixels: ceil(/ 32)
    P = CNNRepresentation(settings, progress=False).pooled([path]).X[0]
    np.testing.assert_allclose(pool(F, 2), P, atol=1e-4)


def test_cell_boxes_tile_what_the_network_sees():
    assert crop_box(300, 5) == (142.0, 0.0, 15.0, 5.0)  # centred 3:1 crop of a long strip
    assert crop_box(30, 100) == (0.0, 5.0, 30.0, 90.0)
    assert crop_box(192, 128) == (0.0, 0.0, 192.0, 128.0)
    boxes = cell_boxes((7, 11), (224, 336), (0.0, 0.0, 192.0, 128.0))
    assert boxes.shape == (77, 4)
    assert boxes[:, 2:].prod(1).sum() == pytest.approx(192 * 128)  # no gap, no overlap
    assert boxes[-1, 2] == pytest.approx(16 * 192 / 336)  # the last column: half a tile
    assert (boxes[:, 0] + boxes[:, 2]).max() == pytest.approx(192)


def test_heat_map_keeps_the_total():
    rng = np.random.default_rng(5)
    xy = rng.uniform(0, 50, (40, 2))
    wh = rng.uniform(1, 50, (40, 2))
    boxes = np.hstack([xy, np.minimum(wh, [100, 60] - xy)])
    values = rng.normal(size=40)
    heat = heat_map(boxes, values, 100, 60)
    assert heat.shape == (38, 64)
    assert heat.sum() == pytest.approx(values.sum(), abs=1e-9)
    one = heat_map(np.array([[0, 0, 50, 60]]), np.array([3.0]), 100, 60)
    assert one[:, :32].sum() == pytest.approx(3.0) and one[:, 32:].sum() == 0


def test_default_model_explanation_adds_up_to_the_linear_score(system, tmp_path):
    path = tmp_path / "seen.png"
    Image.fromarray(disc_picture(11, (60, 90))).save(path)
    q = np.array([1.0, 0.0, 0.5, 0.0, 0.8])
    linear = float(system.transform_paths([path])[0][0] @ q)
    ex = explanation(system, str(path), q)
    assert ex["score"] == pytest.approx(linear, abs=1e-4)  # the Done-when
    assert [v["name"] for v in ex["views"]] == DEFAULT.split("+")
    assert [v["placed"] for v in ex["views"]] == ["cells"] * 3 + ["blocks"]
    assert sum(v["score"] for v in ex["views"]) == pytest.approx(ex["score"], abs=1e-9)
    for v in ex["views"][:3]:
        assert len(v["cells"]) == np.prod(v["grid"])
        assert sum(c[4] for c in v["cells"]) == pytest.approx(v["score"], abs=1e-9)
    assert ex["views"][1]["grid"] == [8, 12]  # lite1 at 240 x 360: its own short side
    assert sum(b[4] for b in ex["blocks"]) == pytest.approx(ex["views"][3]["score"], abs=1e-9)
    assert np.sum(ex["heat"]["values"]) == pytest.approx(ex["score"] - ex["unplaced"],
                                                         abs=1e-6)
    assert (ex["width"], ex["height"], ex["unplaced"], ex["voters"]) == (90, 60, 0.0, [])
    assert "first-order" in ex["exact"]


def test_a_view_with_no_place_is_counted_not_placed(tmp_path):
    """cnn+sift: the SIFT bag belongs to no box; its part of the score is `unplaced`."""
    system = default_system(tmp_path, "cnn+sift", (1.0, 0.5))
    path = tmp_path / "pictures" / "p01.png"
    q = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    ex = explanation(system, str(path), q)
    assert ex["score"] == pytest.approx(float(system.transform_paths([path])[0][0] @ q),
                                        abs=1e-4)
    assert ex["views"][1]["placed"] is None and ex["unplaced"] == ex["views"][1]["score"]
    assert np.sum(ex["heat"]["values"]) == pytest.approx(ex["views"][0]["score"], abs=1e-6)


def test_the_route_explains_a_cnn_model(system, tmp_path, monkeypatch):
    from fakes import build_index

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")  # the query's words are the vocabulary's

    index_dir = build_index(tmp_path, system)
    with TestClient(create_app(index_dir, system=system)) as c:
        hit = c.get("/api/search", params={"q": "red stripes", "k": 1}).json()["hits"][0]
        r = c.get(f"/api/pictures/{hit['id']}/explain", params={"q": "red stripes"})
        assert r.status_code == 200, r.text
        ex = r.json()
    # the index holds what the ONNX-free torch engine gave: the same numbers
    assert ex["score"] == pytest.approx(ex["indexed_score"], abs=1e-4)
    assert ex["score"] == pytest.approx(hit["score"], abs=1e-4)
    assert ex["heat"]["cols"] == 64 and len(ex["heat"]["values"]) == ex["heat"]["rows"]
    with TestClient(create_app(index_dir, system=system)) as c:
        open(hit["path"], "wb").write(b"no longer a picture")
        r = c.get(f"/api/pictures/{hit['id']}/explain", params={"q": "red"})
        assert r.status_code == 422 and "cannot be decoded" in r.json()["detail"]


def test_view_contributions_place_cells_on_the_displayed_picture(tmp_path):
    path = tmp_path / "wide.png"
    Image.fromarray(disc_picture(3, (20, 100))).save(path)  # 5:1, cropped to 60 x 20
    rep = rep_with_stats(SMALL, np.random.default_rng(0))
    v = view_contributions(rep, path, np.ones(1280))
    assert (v["width"], v["height"]) == (100, 20)
    assert v["boxes"][:, 0].min() == pytest.approx(20) and \
        (v["boxes"][:, 0] + v["boxes"][:, 2]).max() == pytest.approx(80)


def test_a_mixed_model_explains_its_neighbour_part_by_the_voters(system, tmp_path, monkeypatch):
    """Issue 26: the map explains the linear part; the captioned pictures that voted for the
    query's words explain the neighbour part, with their page ids where the index holds them."""
    from fakes import build_index

    from pamir.models.neighbours import LabelTransfer, Neighbours, mix_stats, view_of

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    index_dir = build_index(tmp_path, system)
    paths = sorted((tmp_path / "pictures").iterdir())
    F, ok, _ = system.features(paths)
    captions = [("red",) if i % 2 else ("green", "sky") for i in range(len(paths))]
    Y = sp.csr_matrix(np.array([[w in c for w in VOCAB] for c in captions], np.float32))
    views = [(0, 64)]
    lt = LabelTransfer(k=4).fit(view_of(F, views), Y, ids=list(range(len(paths))),
                                paths=[str(p) for p in paths])
    part = Neighbours(lt, views, 0.4, mix_stats(system.transform_features(F, ok),
                                                 lt.transform(view_of(F, views))))
    mixed_system = System(system.pipeline, system.model, system.vocabulary, system.idf,
                          system.info, part)
    ex = explanation(mixed_system, str(paths[0]), np.array([0.0, 1.0, 0.0, 0.0, 0.0]))
    assert ex["neighbour_weight"] == pytest.approx(0.4)
    assert 0 < len(ex["voters"]) <= 4
    assert all("green" in v["words"] for v in ex["voters"])  # they carry the query's word
    weights = [v["weight"] for v in ex["voters"]]
    assert weights == sorted(weights, reverse=True)
    with TestClient(create_app(index_dir, system=mixed_system)) as c:
        hit = c.get("/api/search", params={"q": "green", "k": 1}).json()["hits"][0]
        got = c.get(f"/api/pictures/{hit['id']}/explain", params={"q": "green"}).json()
    assert got["voters"] and all(isinstance(v["picture"], int) for v in got["voters"])
