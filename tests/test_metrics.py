import numpy as np
import pytest
import scipy.sparse as sp

from pamir.evaluation import (annotation_metrics, average_precision, interpolated_precision,
                              precision_at, r_precision, ranking_metrics, wilcoxon)
from pamir.evaluation.trec import read_run, write_qrels, write_run


def test_average_precision_hand_case():
    # ranking: R N R N N -> AvgP = (1/1 + 2/3) / 2
    s = np.array([[5, 4, 3, 2, 1]], float)
    r = np.array([[1, 0, 1, 0, 0]])
    assert np.isclose(average_precision(s, r)[0], (1 + 2 / 3) / 2)
    assert np.isclose(r_precision(s, r)[0], 0.5)
    assert np.isclose(precision_at(s, r, 2)[0], 0.5)
    assert np.isclose(precision_at(s, r, 10)[0], 0.2)  # k counts past the end


def test_ties_are_pessimistic_by_default():
    s = np.zeros((1, 4))
    r = np.array([[0, 1, 0, 0]])
    assert np.isclose(average_precision(s, r)[0], 1 / 4)  # the relevant picture last
    rnd = [average_precision(s, r, ties="random", seed=k)[0] for k in range(20)]
    assert len(set(np.round(rnd, 6))) > 1


def test_interpolated_curve_hand_case():
    s = np.array([[5, 4, 3, 2, 1]], float)
    r = np.array([[0, 1, 0, 0, 1]])
    curve = interpolated_precision(s, r)[0]
    # precision at the relevant pictures: 1/2 (recall .5), 2/5 (recall 1)
    assert np.allclose(curve[:6], 0.5) and np.allclose(curve[6:], 0.4)


def test_ranking_metrics_agree_with_single_functions():
    rng = np.random.default_rng(0)
    s = rng.random((30, 40))
    r = rng.random((30, 40)) < 0.1
    r[:, 0] = True
    m = ranking_metrics(s, sp.csr_matrix(r))
    assert np.allclose(m["avgp"], average_precision(s, r))
    assert np.allclose(m["bep"], r_precision(s, r))
    assert np.allclose(m["p10"], precision_at(s, r, 10))


def test_against_ir_measures_on_a_real_run(corel_protocol, tmp_path):
    ir_measures = pytest.importorskip("ir_measures")
    from pamir.features.blobs import load_blobs
    from pamir.models.pamir import PAMIR
    p = corel_protocol
    # a real run: PAMIR trained on the training pictures' blob features (Corel 5k's own
    # region features, no decoding needed), ranking the test pictures for the test queries
    B, _ = load_blobs(p.collection)
    model = PAMIR(n_updates=200_000).fit(B[p.train], p.presence(p.train))
    qs = p.queries("test")
    docids = [p.collection.ids[i] for i in qs.pictures]
    Z = B[qs.pictures] @ model.W_.T.astype(np.float64)
    scores = np.asarray(p.query_vectors(qs).astype(np.float64) @ Z.T)
    # trec_eval breaks ties by document id, we break them pessimistically: compare on the
    # queries whose scores are all distinct (all but a few dozen)
    distinct = np.array([len(np.unique(row)) == len(row) for row in scores])
    assert distinct.mean() > 0.9
    scores, relevance = scores[distinct], qs.relevance[np.flatnonzero(distinct)]
    qids = [q for q, keep in zip(qs.qids(), distinct) if keep]
    write_run(tmp_path / "run.trec", qids, docids, scores)
    write_qrels(tmp_path / "qrels", qids, docids, relevance)
    run = list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels")))
    theirs = ir_measures.calc_aggregate(
        [ir_measures.AP, ir_measures.P @ 10, ir_measures.Rprec], qrels, run)
    ours = ranking_metrics(scores, relevance)
    assert np.isclose(theirs[ir_measures.AP], ours["avgp"].mean(), atol=1e-6)
    assert np.isclose(theirs[ir_measures.P @ 10], ours["p10"].mean(), atol=1e-6)
    assert np.isclose(theirs[ir_measures.Rprec], ours["bep"].mean(), atol=1e-6)
    assert 0.04 < ours["avgp"].mean() < 0.5  # informative (random scores: about 0.016)


def test_trec_export_round_trip(tmp_path):
    s = np.array([[0.1, 0.9, 0.5]])
    write_run(tmp_path / "r", ["q1"], ["a", "b", "c"], s, tag="t")
    lines = (tmp_path / "r").read_text().splitlines()
    assert lines[0] == "q1 Q0 b 1 0.9 t" and lines[2].startswith("q1 Q0 a 3")
    assert read_run(tmp_path / "r") == {"q1": {"a": 0.1, "b": 0.9, "c": 0.5}}
    write_qrels(tmp_path / "q", ["q1", "q2"], ["a", "b"], sp.csr_matrix([[0, 1], [1, 1]]))
    assert (tmp_path / "q").read_text().splitlines() == ["q1 0 b 1", "q2 0 a 1", "q2 0 b 1"]


def test_annotation_metrics_hand_case():
    # 3 pictures, 3 words; 1 word annotated per picture
    scores = np.array([[0.9, 0.1, 0.0], [0.8, 0.5, 0.0], [0.1, 0.9, 0.0]])
    truth = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]])
    m = annotation_metrics(scores, truth, n_words=1)
    # word0: predicted twice, correct once -> P .5, R 1; word1: P 1, R .5; word2: P 0, R 0
    assert np.allclose(m["per_word_precision"], [0.5, 1.0, 0.0])
    assert np.allclose(m["per_word_recall"], [1.0, 0.5, 0.0])
    assert m["n_plus"] == 2 and m["words"] == 3
    assert np.isclose(m["mean_precision"], 0.5) and np.isclose(m["mean_recall"], 0.5)


def test_wilcoxon_detects_a_consistent_difference():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    assert wilcoxon(a + 0.05, a)["significant"]
    assert wilcoxon(a + 0.05, a)["better"] == "a"
    b = a + rng.normal(0, 0.01, 200)
    assert not wilcoxon(a, a)["significant"]
    assert wilcoxon(a, b)["pvalue"] > 0.001
