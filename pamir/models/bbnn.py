"""BBNN: the block-based neural network (Grangier & Bengio, ICANN 2006).

A picture is a set of block descriptors b_1..b_B (log-scaled uLBP + colour histograms). The
network scores a query q against a picture p with four layers:

    L1  f_i = tanh(W1 b_i + B1)              per block          (N1 units)
    A2  f   = mean_i f_i                     over the blocks
    T3  t   = W3 tanh(W2 f + B2) + B3        to the vocabulary   (N2 hidden units)
    M4  s   = t . q                          the query match

It is trained end to end by SGD on the margin ranking loss over triplets (q, p+, p-) drawn
with replacement from the training queries, with the text-epsilon margin (§3.1, eq. 4):
    l = max(0, eps_k - s(q, p+) + s(q, p-)),  eps_k = max(eps, q.c+ - q.c-),
c the normalised idf caption vectors. Early stopping keeps the weights with the best
validation AvgP. `transform` returns t, the T3 output, so retrieval is Z q as for every model.

Torch (CPU) does the arithmetic and the gradients; the weights are saved as numpy arrays
through the base class (npz, never pickled).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import torch

from ..evaluation import mean_average_precision
from ..features.ragged import Ragged
from ..text.vectors import text_vectors
from .base import TextSpaceModel, TrainingQueries

PARAMS = ("W1", "B1", "W2", "B2", "W3", "B3")
CHUNK_PICTURES = 512  # pictures per forward pass in transform (bounds memory)


# ------------------------------------------------------------------------------- blocks
def as_blocks(X) -> Ragged:
    """Accept a BlockSet (`.descriptors`, `.offsets`), a (descriptors, offsets) pair or an
    (n x B x N0) array (every picture with B blocks).

    BBNN reads log(1 + count) block histograms (§4.2): a BlockSet of counts (what `pamir fit`
    extracts) is taken to logs here, one made with FeatureSettings(log_counts=True) (what
    benchmarks/bench_bbnn.py extracts) is already, so both train the same network."""
    if hasattr(X, "descriptors") and hasattr(X, "offsets"):
        desc, offsets = X.descriptors, X.offsets
        if getattr(X, "log_counts", True) is False:
            desc = np.log1p(np.asarray(desc, dtype=np.float32))
    elif isinstance(X, tuple) and len(X) == 2:
        desc, offsets = X
    elif isinstance(X, np.ndarray) and X.ndim == 3:
        n, b, _ = X.shape
        desc, offsets = X.reshape(n * b, -1), np.arange(n + 1) * b
    else:
        raise TypeError(
            f"BBNN takes block descriptors (a BlockSet from pamir.features.extract_blocks, a "
            f"(descriptors, offsets) pair or an n x blocks x dim array), not "
            f"{type(X).__name__}; bags of visterms are for the other models"
        )
    return Ragged(np.asarray(desc, dtype=np.float32), np.asarray(offsets, dtype=np.int64)).check()


# ------------------------------------------------------------------------------ network
def init_weights(n_in: int, n1: int, n2: int, n_words: int, seed: int,
                 dtype=torch.float32) -> dict[str, torch.Tensor]:
    """LeCun et al.'s initialisation (Efficient BackProp, the paper's [14]): uniform weights
    of standard deviation 1/sqrt(fan-in) on standardised inputs, zero biases."""
    g = torch.Generator().manual_seed(seed)

    def uniform(rows, cols):
        bound = np.sqrt(3.0 / cols)
        return (torch.rand(rows, cols, generator=g, dtype=dtype) * 2 - 1) * bound

    return {"W1": uniform(n1, n_in), "B1": torch.zeros(n1, dtype=dtype),
            "W2": uniform(n2, n1), "B2": torch.zeros(n2, dtype=dtype),
            "W3": uniform(n_words, n2), "B3": torch.zeros(n_words, dtype=dtype)}


def text_layer(w: dict[str, torch.Tensor], blocks: torch.Tensor, segment: torch.Tensor,
               counts: torch.Tensor) -> torch.Tensor:
    """L1, A2, T3: standardised block rows (n_rows x N0) of len(counts) pictures -> (n x T).

    segment[r] is the picture of row r; counts[j] the number of blocks of picture j.
    """
    f_blocks = torch.tanh(blocks @ w["W1"].T + w["B1"])                      # L1
    f = torch.zeros(len(counts), f_blocks.shape[1], dtype=f_blocks.dtype)
    f = f.index_add(0, segment, f_blocks) / counts[:, None]                    # A2
    return torch.tanh(f @ w["W2"].T + w["B2"]) @ w["W3"].T + w["B3"]          # T3


def margin_loss(t_pos: torch.Tensor, t_neg: torch.Tensor, q: torch.Tensor,
                eps: torch.Tensor) -> torch.Tensor:
    """Mean over triplets of max(0, eps - t+.q + t-.q) (M4 and eq. 3)."""
    return torch.relu(eps - (t_pos * q).sum(1) + (t_neg * q).sum(1)).mean()


def pooled_margin_loss(t_pos: torch.Tensor, t_pool: torch.Tensor, q: torch.Tensor,
                       eps: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """The same loss with every (q_k, p+_k) compared to a pool of pictures instead of one p-.

    t_pool: (m x T) pictures; eps, negative: (k x m) margins and whether pool picture j is
    non-relevant to q_k. Each pair's loss is its mean over its negatives, an estimate of the
    expected triplet loss over uniform p- with less variance than one draw.
    """
    s_pos = (t_pos * q).sum(1, keepdim=True)
    hinge = torch.relu(eps - s_pos + q @ t_pool.T) * negative
    return (hinge.sum(1) / negative.sum(1).clamp(min=1)).mean()


# ----------------------------------------------------------------------------- triplets
class TripletSampler:
    """Triplets (q, p+, p-) drawn with replacement: q uniform over the training queries, p+
    uniform over its relevant pictures, p- uniform over the others; with their text-epsilon
    margins max(eps, q.c+ - q.c-)."""

    def __init__(self, queries: TrainingQueries, captions: sp.csr_matrix, epsilon: float,
                 margin: str, rng: np.random.Generator):
        self.Q = sp.csr_matrix(queries.vectors, dtype=np.float32)
        self.R = sp.csr_matrix(queries.relevance)
        self.C = sp.csr_matrix(captions, dtype=np.float32)
        self.n = self.R.shape[1]
        self.epsilon, self.margin, self.rng = epsilon, margin, rng
        self.n_rel = np.diff(self.R.indptr)
        rows = np.repeat(np.arange(self.R.shape[0], dtype=np.int64), self.n_rel)
        self.relevant_keys = rows * self.n + self.R.indices  # sorted: CSR rows are sorted
        if np.any(self.n_rel >= self.n):
            raise ValueError("a training query is relevant to every picture: no negatives")

    def sample(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """k triplets: query, positive, negative indices and margins."""
        q = self.rng.integers(len(self.n_rel), size=k)
        pos = self.R.indices[self.R.indptr[q] + self.rng.integers(self.n_rel[q])]
        neg = self.rng.integers(self.n, size=k)
        bad = self._relevant(q, neg)
        while bad.any():  # rejection: few pictures are relevant to a query
            neg[bad] = self.rng.integers(self.n, size=int(bad.sum()))
            bad[bad] = self._relevant(q[bad], neg[bad])
        if self.margin == "text":
            Qk = self.Q[q]
            text = (np.asarray(Qk.multiply(self.C[pos]).sum(1)).ravel()
                    - np.asarray(Qk.multiply(self.C[neg]).sum(1)).ravel())
            eps = np.maximum(self.epsilon, text)
        else:
            eps = np.full(k, self.epsilon)
        return q, pos, neg, eps.astype(np.float32)

    def pool(self, q: np.ndarray, pos: np.ndarray, pool: np.ndarray):
        """Margins and non-relevance (k x m float32) of each (q_k, p+_k) against each pool
        picture."""
        k, m = len(q), len(pool)
        negative = ~self._relevant(np.repeat(q, m), np.tile(pool, k)).reshape(k, m)
        if self.margin == "text":
            Qk = self.Q[q]
            text = (np.asarray(Qk.multiply(self.C[pos]).sum(1)).reshape(k, 1)
                    - (Qk @ self.C[pool].T).toarray())
            eps = np.maximum(self.epsilon, text)
        else:
            eps = np.full((k, m), self.epsilon)
        return eps.astype(np.float32), negative.astype(np.float32)

    def _relevant(self, q: np.ndarray, p: np.ndarray) -> np.ndarray:
        keys = q.astype(np.int64) * self.n + p
        at = np.searchsorted(self.relevant_keys, keys)
        at = np.minimum(at, len(self.relevant_keys) - 1)
        return self.relevant_keys[at] == keys


# -------------------------------------------------------------------------------- model
class BBNN(TextSpaceModel):
    """The block-based neural network.

    n_hidden1: N1, units of L1 applied to every block; n_hidden2: N2, hidden units of T3.
    learning_rate: SGD step on the batch-mean loss; batch_size: triplets per step (1: the
        paper's one-triplet SGD).
    negatives: "sampled" (each triplet its own p-, the paper) or "pooled" (each (q, p+) of
        a batch against all the batch's sampled p- not relevant to q: more comparisons for
        the same network passes, which dominate the cost).
    epsilon, margin: the margin, "text" (eps_k = max(epsilon, q.c+ - q.c-), §3.1) or
        "constant" (eps_k = epsilon).
    max_triplets: training length; eval_every, patience: early stopping on validation AvgP
        (measured every eval_every triplets, stop after `patience` measurements without a
        new best, keep the best weights). Without validation data, train max_triplets.
    standardize: centre and scale each descriptor dimension with training-block statistics
        (Efficient BackProp: the initialisation assumes unit-variance inputs).
    """

    kind = "bbnn"
    input = "blocks"
    #: §5.1: lambda, N1 and N2 "selected through cross-validation". Small, because each point
    #: costs 0.5-1 min on 2 cores; centred on a first grid's winner (lr 1.0, N1 100, N2 150,
    #: each on an edge of lr 1-2, N1 50-100, N2 50-150), so that a winner on an edge again
    #: says the grid should move.
    param_grid = {"learning_rate": [0.5, 1.0, 2.0], "n_hidden1": [100, 200],
                  "n_hidden2": [150, 300]}
    #: Triplets per grid point while selecting; the chosen point then trains max_triplets.
    selection_params = {"max_triplets": 100_000}

    def __init__(self, n_hidden1: int = 100, n_hidden2: int = 150, learning_rate: float = 1.0,
                 epsilon: float = 0.1, margin: str = "text", batch_size: int = 32,
                 negatives: str = "pooled", max_triplets: int = 900_000,
                 eval_every: int = 50_000, patience: int = 4, standardize: bool = True,
                 max_query_words: int | None = None, random_state: int = 0,
                 n_threads: int = 1, verbose: bool = False):
        # Defaults measured on Corel 5k: "pooled" negatives gave validation AvgP 15.6 vs 10.8
        # "sampled" for the same time (20k triplets of batch 32 at lr 1.0); 900k triplets is
        # ~10 min here. One torch thread although the machine has two cores: the matrices
        # are small and two OpenMP threads spin against other processes (29 s vs 4.5 s for
        # the same 10k triplets).
        self.n_hidden1 = n_hidden1
        self.n_hidden2 = n_hidden2
        self.learning_rate = learning_rate
        self.epsilon = epsilon
        self.margin = margin
        self.batch_size = batch_size
        self.negatives = negatives
        self.max_triplets = max_triplets
        self.eval_every = eval_every
        self.patience = patience
        self.standardize = standardize
        #: Train and validate on the queries of at most this many words (1: the paper's
        #: single-word model of Table 3); None: every subset of a caption.
        self.max_query_words = max_query_words
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    def _check_params(self) -> None:
        for name in ("n_hidden1", "n_hidden2", "batch_size", "max_triplets", "eval_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"BBNN {name}={getattr(self, name)}: use a positive integer")
        if not self.learning_rate > 0 or not self.epsilon > 0:
            raise ValueError(f"BBNN learning_rate={self.learning_rate}, epsilon={self.epsilon}:"
                             " both must be positive")
        if self.margin not in ("text", "constant"):
            raise ValueError(f"BBNN margin={self.margin!r}: use 'text' or 'constant'")
        if self.max_query_words is not None and int(self.max_query_words) < 1:
            raise ValueError(f"BBNN max_query_words={self.max_query_words}: use None or >= 1")
        if self.negatives not in ("sampled", "pooled"):
            raise ValueError(f"BBNN negatives={self.negatives!r}: use 'sampled' or 'pooled'")

    # ------------------------------------------------------------------------------ fit
    def fit(self, X, Y, *, validation=None, callback=None):
        """X: block descriptors of n training pictures; Y: (n x T) caption presence;
        validation=(X_valid, Y_valid) early-stops; callback(triplets, max_triplets,
        valid_avgp) after each evaluation."""
        self._check_params()
        X_valid, Y_valid = validation if validation is not None else (None, None)
        torch.set_num_threads(self.n_threads)
        torch.manual_seed(self.random_state)
        rng = np.random.default_rng(self.random_state)
        blocks, Y = as_blocks(X), sp.csr_matrix(Y)
        if len(blocks) != Y.shape[0]:
            raise ValueError(f"{len(blocks)} pictures of blocks but {Y.shape[0]} caption rows")
        if np.any(blocks.n_blocks == 0):
            raise ValueError(f"{int((blocks.n_blocks == 0).sum())} training pictures have no "
                             "blocks (unreadable?): drop them from the training set")
        if Y.nnz == 0:
            raise ValueError("no training picture has a caption word: nothing to learn")

        self._fit_scaling(blocks)
        queries = TrainingQueries(Y, max_words=self.max_query_words)
        self.idf_ = queries.idf
        sampler = TripletSampler(queries, text_vectors(Y, queries.idf), self.epsilon,
                                 self.margin, rng)
        valid = self._validation(X_valid, Y_valid, queries.idf)
        self.w_ = init_weights(blocks.descriptors.shape[1], self.n_hidden1, self.n_hidden2,
                               Y.shape[1], self.random_state)
        for p in self.w_.values():
            p.requires_grad_(True)
        self.history_ = []
        self._train(blocks, sampler, valid, callback)
        for p in self.w_.values():
            p.requires_grad_(False)
        return self

    def _fit_scaling(self, blocks: Ragged) -> None:
        d = blocks.descriptors
        if self.standardize:
            self.block_mean_ = d.mean(axis=0, dtype=np.float64).astype(np.float32)
            std = d.std(axis=0, dtype=np.float64).astype(np.float32)
            self.block_scale_ = np.where(std > 1e-6, 1.0 / np.maximum(std, 1e-6), 1.0)
        else:
            self.block_mean_ = np.zeros(d.shape[1], np.float32)
            self.block_scale_ = np.ones(d.shape[1], np.float32)
        self.block_scale_ = self.block_scale_.astype(np.float32)

    def _validation(self, X_valid, Y_valid, idf_weights):
        if X_valid is None or Y_valid is None:
            return None
        vq = TrainingQueries(Y_valid, idf_weights=idf_weights, max_words=self.max_query_words)
        return as_blocks(X_valid), vq.vectors, vq.relevance

    def _train(self, blocks: Ragged, sampler: TripletSampler, valid, callback) -> None:
        B = int(self.batch_size)
        lr = float(self.learning_rate)
        seen, next_eval, since_best = 0, int(self.eval_every), 0
        best, best_w, t0, loss_sum = -1.0, None, time.perf_counter(), 0.0
        eval_seconds = 0.0
        chunk = max(B, 8192)  # triplets sampled at once (amortises the numpy work)
        while seen < self.max_triplets:
            q, pos, neg, eps = sampler.sample(chunk)
            for a in range(0, chunk, B):
                loss_sum += self._step(blocks, sampler, q[a:a + B], pos[a:a + B],
                                       neg[a:a + B], eps[a:a + B], lr) * len(q[a:a + B])
                seen += len(q[a:a + B])
                if seen >= next_eval or seen >= self.max_triplets:
                    break
            if seen < next_eval and seen < self.max_triplets:
                continue
            next_eval += int(self.eval_every)
            record = {"triplets": seen, "seconds": round(time.perf_counter() - t0, 2),
                      "train_loss": loss_sum / int(self.eval_every)}
            loss_sum = 0.0
            if valid is not None:
                e0 = time.perf_counter()
                record["valid_avgp"] = mean_average_precision(self._text(valid[0]), *valid[1:])
                eval_seconds += time.perf_counter() - e0
                if record["valid_avgp"] > best:
                    best, since_best = record["valid_avgp"], 0
                    best_w = {k: v.detach().clone() for k, v in self.w_.items()}
                else:
                    since_best += 1
            self.history_.append(record)
            if callback is not None:
                callback(seen, int(self.max_triplets), record.get("valid_avgp"))
            if self.verbose:
                print("bbnn", record, flush=True)
            if valid is not None and since_best >= self.patience:
                break
        if best_w is not None:
            with torch.no_grad():
                for k, v in best_w.items():
                    self.w_[k].copy_(v)
        self.best_valid_avgp_ = best if valid is not None else None
        self.triplets_ = seen
        self.fit_seconds_ = time.perf_counter() - t0
        #: SGD alone, validation excluded: what indexing costs once the settings are known
        self.train_seconds_ = self.fit_seconds_ - eval_seconds

    def _step(self, blocks, sampler, q, pos, neg, eps, lr) -> float:
        """One SGD step on a batch of triplets; returns the batch-mean loss."""
        pictures, inverse = np.unique(np.concatenate([pos, neg]), return_inverse=True)
        t = self._forward(blocks, pictures)
        k = len(q)
        Qb = torch.from_numpy(sampler.Q[q].toarray())
        if self.negatives == "pooled":
            pool_eps, negative = sampler.pool(q, pos, neg)
            loss = pooled_margin_loss(t[inverse[:k]], t[inverse[k:]], Qb,
                                      torch.from_numpy(pool_eps), torch.from_numpy(negative))
        else:
            loss = margin_loss(t[inverse[:k]], t[inverse[k:]], Qb, torch.from_numpy(eps))
        value = loss.detach().item()
        if value > 0:  # a satisfied batch has no gradient: skip the backward pass
            grads = torch.autograd.grad(loss, list(self.w_.values()))
            with torch.no_grad():
                for p, g in zip(self.w_.values(), grads):
                    p.sub_(lr * g)
        return value

    def _forward(self, blocks: Ragged, pictures: np.ndarray) -> torch.Tensor:
        rows, segment = blocks.rows(pictures)
        x = (blocks.descriptors[rows] - self.block_mean_) * self.block_scale_
        # a picture without blocks (unreadable) gets f = 0: the network's prior output
        counts = torch.from_numpy(np.maximum(blocks.n_blocks[pictures], 1).astype(np.float32))
        return text_layer(self.w_, torch.from_numpy(x), torch.from_numpy(segment), counts)

    # ------------------------------------------------------------------------ transform
    def _text(self, blocks: Ragged) -> np.ndarray:
        out = []
        with torch.no_grad():
            for a in range(0, len(blocks), CHUNK_PICTURES):
                pictures = np.arange(a, min(a + CHUNK_PICTURES, len(blocks)))
                out.append(self._forward(blocks, pictures).numpy())
        return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)

    def transform(self, X) -> np.ndarray:
        """(n x T) float32: the T3 output t of each picture (its text-space vector)."""
        if not hasattr(self, "w_"):
            raise RuntimeError("BBNN is not fitted: call fit() or BBNN.load(dir) first")
        torch.set_num_threads(self.n_threads)
        blocks = as_blocks(X)
        if blocks.descriptors.shape[1] != self.w_["W1"].shape[1]:
            raise ValueError(f"block descriptors have {blocks.descriptors.shape[1]} dimensions;"
                             f" this model was trained on {self.w_['W1'].shape[1]}")
        return self._text(blocks)

    # ------------------------------------------------------------------------- save/load
    def _state(self):
        arrays = {k: v.detach().numpy() for k, v in self.w_.items()}
        arrays |= {"block_mean": self.block_mean_, "block_scale": self.block_scale_,
                   "idf": np.asarray(self.idf_)}
        meta = {"history": self.history_, "best_valid_avgp": self.best_valid_avgp_,
                "triplets": self.triplets_, "fit_seconds": self.fit_seconds_,
                "train_seconds": self.train_seconds_}
        return meta, arrays

    def _set_state(self, meta, arrays):
        missing = [k for k in (*PARAMS, "block_mean", "block_scale", "idf") if k not in arrays]
        if missing:
            raise ValueError(f"BBNN arrays.npz lacks {', '.join(missing)}: not a BBNN model")
        self.w_ = {k: torch.from_numpy(np.ascontiguousarray(arrays[k], dtype=np.float32))
                   for k in PARAMS}
        self.block_mean_ = arrays["block_mean"].astype(np.float32)
        self.block_scale_ = arrays["block_scale"].astype(np.float32)
        self.idf_ = arrays["idf"]
        self.history_ = meta.get("history", [])
        self.best_valid_avgp_ = meta.get("best_valid_avgp")
        self.triplets_ = meta.get("triplets")
        self.fit_seconds_ = meta.get("fit_seconds")
        self.train_seconds_ = meta.get("train_seconds")
