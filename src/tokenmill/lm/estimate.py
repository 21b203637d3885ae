"""Interpolated modified Kneser-Ney (Chen & Goodman 1998), the estimate KenLM's ``lmplz`` makes, over the
merged counts; then pruning, and the backoff weights that keep every context's distribution summing to one.

Each order's n-grams are kept sorted by a packed key, ``index of the (n-1)-word prefix * V + last word``
(V: the vocabulary size), so a prefix's extensions are one contiguous run and a lookup is ``searchsorted``.
``suffix[n][i]`` is the index, in order n-1, of n-gram i without its first word.

* Adjusted counts: the highest order's raw counts; below it, the number of distinct words seen before the
  n-gram (its continuation count), except for n-grams that start with ``<s>`` (nothing comes before them),
  which keep their raw counts.
* Discounts per order from the counts of adjusted counts 1..4: ``Y = n1 / (n1 + 2 n2)``, ``D1 = 1 - 2Y n2/n1``,
  ``D2 = 2 - 3Y n3/n2``, ``D3+ = 3 - 4Y n4/n3``; where a corpus is too small for one of them to lie in
  ``(0, k)``, that order's discounts are 0.5, 1, 1.5.
* ``p(w | h) = (a(hw) - D(a(hw))) / a(h.) + gamma(h) p(w | h')``, ``gamma(h) = (D1 N1(h.) + D2 N2(h.) + D3+
  N3+(h.)) / a(h.)``; unigrams interpolate with the uniform distribution over the vocabulary (``<s>`` apart,
  which is never predicted: log10 -99), so ``<unk>`` has ``gamma / |V|``.
* Pruning (``prune[n-1]``: the n-grams of order n whose adjusted count is at most it are dropped; unigrams
  never): the kept n-grams keep their probabilities, and so that the ARPA file is closed (KenLM needs every
  n-gram's prefix and suffix), the prefix and suffix of every kept n-gram are kept too. The mass of the
  dropped n-grams goes to their context's backoff: ``b(h) = gamma(h) + sum_dropped (a - D) / a(h.) /
  (1 - sum_kept p(w | h'))`` (with nothing dropped, ``b(h) = gamma(h)``: the interpolated model exactly).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tokenmill.lm.counts import BOS, UNK

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
NEVER = -99.0  # log10 p(<s>): KenLM's value for a word never predicted


@dataclass
class Model:
    """An n-gram model as arrays: ``keys[n-1]`` (packed, sorted; order 1: the word ids 0..V-1),
    ``logp[n-1]`` and ``backoff[n-1]`` (log10; the highest order has no backoff)."""

    order: int
    vocab: pa.Array
    keys: list[np.ndarray]
    logp: list[np.ndarray]
    backoff: list[np.ndarray]
    info: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.vocab)


def packed(rows: np.ndarray, keys: list[np.ndarray], size: int) -> np.ndarray:
    """Packed keys of ``rows`` (n words each), the prefixes' keys being in ``keys`` (orders 1..n-1)."""
    n = rows.shape[1]
    idx = rows[:, 0].astype(np.int64)
    for k in range(1, n - 1):
        idx = np.searchsorted(keys[k], idx * size + rows[:, k])
    return idx * size + rows[:, n - 1] if n > 1 else idx


def discounts(adjusted: np.ndarray) -> tuple[float, float, float]:
    """``(D1, D2, D3+)`` from the counts of adjusted counts (module docstring)."""
    n1, n2, n3, n4 = (int((adjusted == k).sum()) for k in (1, 2, 3, 4))
    if min(n1, n2, n3, n4) == 0:
        return FALLBACK_DISCOUNTS
    y = n1 / (n1 + 2 * n2)
    d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
    if not all(0 < dk < k for dk, k in zip(d, (1, 2, 3))):
        return FALLBACK_DISCOUNTS
    return d


def _discount_of(adjusted: np.ndarray, d: tuple[float, float, float]) -> np.ndarray:
    return np.select([adjusted == 0, adjusted == 1, adjusted == 2], [0.0, d[0], d[1]], d[2])


def estimate(vocab: pa.Array, orders: list[tuple[np.ndarray, np.ndarray]], prune: tuple[int, ...]) -> Model:
    """The model from each order's merged ``(rows, counts)`` (module docstring)."""
    size, top = len(vocab), len(orders)
    orders = [_with_unk(*orders[0]), *orders[1:]]
    keys, prefix, suffix, first = _structure(orders, size)
    adjusted = _adjusted(orders, suffix, first)
    disc = [discounts(a[first[0] != BOS] if n == 0 else a) for n, a in enumerate(adjusted)]
    prob, gamma = _interpolate(adjusted, disc, prefix, suffix, first[0], size)
    keep = _kept(adjusted, prune, prefix, suffix)
    backoff = [_backoff(adjusted[n + 1], disc[n + 1], prefix[n + 1], suffix[n + 1], keep[n + 1], gamma[n], prob[n])
               for n in range(top - 1)]
    logp = [np.log10(np.maximum(p, 1e-300)) for p in prob]
    logp[0][BOS] = NEVER
    info = {"ngrams_counted": [int(len(k)) for k in keys], "ngrams": [int(k.sum()) for k in keep],
            "discounts": [[round(x, 6) for x in d] for d in disc], "prune": list(prune)}
    return _pruned(Model(top, vocab, keys, logp, [np.log10(b) for b in backoff], info), keep, prefix, size)


def _with_unk(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unigrams with ``<unk>`` (count 0) when the text never produced it (it never does: every word it
    holds is in the vocabulary), so that it has a probability."""
    if len(rows) and rows[0, 0] == UNK:
        return rows, counts
    return np.concatenate([[[UNK]], rows]), np.concatenate([[0], counts])


def _structure(orders, size):
    """Packed keys, prefix and suffix indices, and first word of every n-gram of every order."""
    keys, prefix, suffix, first = [], [], [], []
    for n, (rows, _) in enumerate(orders, start=1):
        k = packed(rows, keys, size)
        keys.append(k)
        if n == 1:
            if not np.array_equal(k, np.arange(size)):
                raise ValueError("the unigrams are not the vocabulary")  # a bug, never the input's fault
            prefix.append(np.zeros(0, dtype=np.int64))
            suffix.append(np.zeros(0, dtype=np.int64))
            first.append(k.copy())
            continue
        p = k // size
        w = k % size
        sfx = w if n == 2 else np.searchsorted(keys[n - 2], suffix[n - 2][p] * size + w)
        prefix.append(p)
        suffix.append(sfx)
        first.append(first[n - 2][p])
    return keys, prefix, suffix, first


def _adjusted(orders, suffix, first) -> list[np.ndarray]:
    top = len(orders)
    out = []
    for n in range(top):
        raw = orders[n][1].astype(np.int64)
        if n == top - 1:
            out.append(raw)
            continue
        cont = np.bincount(suffix[n + 1], minlength=len(raw)).astype(np.int64)
        out.append(np.where(first[n] == BOS, raw, cont))
    return out


def _interpolate(adjusted, disc, prefix, suffix, first1, size):
    """Interpolated probabilities of every order, and every context's gamma (index: the context's n-gram)."""
    a1 = adjusted[0].astype(np.float64)
    a1[BOS] = 0.0
    d1 = _discount_of(adjusted[0], disc[0])
    d1[BOS] = 0.0
    total = a1.sum()
    g0 = d1.sum() / total
    predicted = size - 1  # every word but <s>
    p1 = (a1 - d1) / total + g0 / predicted
    p1[BOS] = 0.0
    prob, gamma = [p1], []
    for n in range(1, len(adjusted)):
        a = adjusted[n].astype(np.float64)
        d = _discount_of(adjusted[n], disc[n])
        ctx = len(prob[n - 1])
        tot = np.bincount(prefix[n], weights=a, minlength=ctx)
        g = np.divide(np.bincount(prefix[n], weights=d, minlength=ctx), tot, out=np.zeros(ctx), where=tot > 0)
        gamma.append(g)
        prob.append((a - d) / tot[prefix[n]] + g[prefix[n]] * prob[n - 1][suffix[n]])
    return prob, gamma


def _kept(adjusted, prune, prefix, suffix) -> list[np.ndarray]:
    """Which n-grams the model keeps: above their order's threshold, or the prefix or suffix of one kept."""
    keep = [np.ones(len(adjusted[0]), dtype=bool)]
    keep += [adjusted[n] > (prune[n] if n < len(prune) else prune[-1]) for n in range(1, len(adjusted))]
    for n in range(len(adjusted) - 1, 1, -1):
        keep[n - 1][prefix[n][keep[n]]] = True
        keep[n - 1][suffix[n][keep[n]]] = True
    return keep


def _backoff(adjusted, disc, prefix, suffix, keep, gamma, lower) -> np.ndarray:
    """Each context's backoff weight (module docstring): gamma plus the dropped extensions' mass, spread over
    what the lower order gives the words the context does not keep."""
    ctx = len(gamma)
    a = adjusted.astype(np.float64)
    tot = np.bincount(prefix, weights=a, minlength=ctx)
    own = (a - _discount_of(adjusted, disc)) / tot[prefix]
    dropped = np.bincount(prefix[~keep], weights=own[~keep], minlength=ctx)
    covered = np.bincount(prefix[keep], weights=lower[suffix[keep]], minlength=ctx)
    has = tot > 0
    b = np.ones(ctx)
    b[has] = gamma[has] + dropped[has] / np.maximum(1.0 - covered[has], 1e-12)
    return b


def _pruned(model: Model, keep, prefix, size) -> Model:
    """The model without the dropped n-grams: keys re-packed on the kept prefixes' new indices."""
    new_index = [np.cumsum(k) - 1 for k in keep]
    keys, logp, backoff = [model.keys[0]], [_rounded(model.logp[0])], []
    for n in range(1, model.order):
        kk = keep[n]
        keys.append(new_index[n - 1][prefix[n][kk]] * size + model.keys[n][kk] % size)
        logp.append(_rounded(model.logp[n][kk]))
    for n in range(model.order - 1):
        backoff.append(_rounded(model.backoff[n][keep[n]]))
    return Model(model.order, model.vocab, keys, logp, backoff, model.info)


def _rounded(x: np.ndarray) -> np.ndarray:
    """log10 values as the ARPA file writes them (6 decimals), so that the binary model scores as the ARPA."""
    return np.round(x, 6)
