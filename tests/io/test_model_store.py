"""The models group: created once, whoever of several concurrent writers gets there first."""

from __future__ import annotations

import threading

import zarr

from jsmf_dask.io.model_store import ensure_model_group


def test_writers_that_create_the_models_group_at_once_all_succeed(tmp_path):
    """choose-k commits models from two threads; the first commits of a root both find ``model.zarr`` missing.
    Before, the loser of the creation raised zarr's ContainsGroupError (seen on CI)."""
    for round_ in range(20):
        root = str(tmp_path / f"r{round_}")
        barrier, errors = threading.Barrier(8), []

        def create():
            barrier.wait()
            try:
                ensure_model_group(root)
            except Exception as err:  # noqa: BLE001 - collected for the assertion
                errors.append(repr(err))

        threads = [threading.Thread(target=create) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        zarr.open_group(f"{root}/model.zarr", mode="r")


def test_the_loser_of_the_creation_takes_the_winners_group(tmp_path, monkeypatch):
    import jsmf_dask.io.model_store as module

    root = str(tmp_path / "r")
    real = zarr.open_group

    def another_writer_first(store, *args, mode="r", **kwargs):
        if mode == "a":  # the other writer creates it between this one's check and its creation
            real(store, mode="a", **kwargs)
            raise zarr.errors.ContainsGroupError("A group exists in store")
        return real(store, *args, mode=mode, **kwargs)

    monkeypatch.setattr(module.zarr, "open_group", another_writer_first)
    ensure_model_group(root)
    monkeypatch.undo()
    zarr.open_group(f"{root}/model.zarr", mode="r")
