"""Groups of documents by id (refine's sweeps in rounds): by id alone, about equal, independent of the samples."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels.doc_split import DocumentSplit, doc_groups, doc_hashes, sample_mask

IDS = [f"doc-{i}" for i in range(8000)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, len(IDS) - 1), min_size=1, max_size=200), st.integers(1, 7))
def test_a_document_s_group_depends_on_its_id_alone(picked, n_groups):
    everyone = doc_groups(doc_hashes(IDS), n_groups)
    some = doc_groups(doc_hashes([IDS[i] for i in picked]), n_groups)
    np.testing.assert_array_equal(some, everyone[picked])  # whichever block, whichever order
    assert ((0 <= some) & (some < n_groups)).all()


def test_one_group_is_every_document():
    assert (doc_groups(doc_hashes(IDS[:10]), 1) == 0).all()


def test_groups_are_about_equal_and_independent_of_the_split_and_the_samples():
    hashes = doc_hashes(IDS)
    groups = doc_groups(hashes, 4)
    # 8,000 documents in 4 groups: 2,000 ± 39 (binomial sd); 5 sd either way
    assert (np.abs(np.bincount(groups, minlength=4) - 2000) < 5 * 39).all()
    held, valid = DocumentSplit(0.1, 0.05).masks(hashes=hashes)
    sampled = sample_mask(hashes, 0.25)
    for mask, share in ((held, 0.1), (valid, 0.05), (sampled, 0.25)):
        for g in range(4):
            n = int((groups == g).sum())
            sd = np.sqrt(n * share * (1 - share))
            assert abs(int((mask & (groups == g)).sum()) - n * share) < 5 * sd
