"""The deploy/ manifests parse, and the fields that must agree with the code do."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from jsmf_dask.pipeline.run_config import load_run_config

REPO = Path(__file__).parents[1]
DEPLOY = REPO / "deploy"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"jsmf-dask:{VERSION}"


def _mappings(doc, keys: tuple[str, ...]) -> list[dict]:
    """Every mapping of a manifest (at any depth) that has all of ``keys``."""
    found = []
    if isinstance(doc, dict):
        if all(key in doc for key in keys):
            found.append(doc)
        for v in doc.values():
            found.extend(_mappings(v, keys))
    elif isinstance(doc, list):
        for v in doc:
            found.extend(_mappings(v, keys))
    return found


def containers(doc) -> list[dict]:
    return _mappings(doc, ("image", "name"))


REGISTRY = "registry.example.com"  # the placeholder the README says to replace after `docker push`


def _docs() -> dict[str, list]:
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted((DEPLOY / "kubernetes").glob("*.yaml"))}


def _pods(doc) -> list[dict]:
    """Every pod spec (a mapping with ``containers``) in a manifest."""
    return _mappings(doc, ("containers",))


def _mounts(pod: dict) -> dict[str, str]:
    """``{mount path: claim name}`` of a pod's containers."""
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", [])}
    return {m["mountPath"]: claims[m["name"]] for c in pod["containers"] for m in c.get("volumeMounts", [])}


def test_kubernetes_manifests_agree_with_the_code():
    docs = _docs()
    assert set(docs) == {"daskcluster.yaml", "daskjob.yaml", "cronjob-nightly.yaml", "volumes.yaml"}
    versions = {"cronjob-nightly.yaml": "batch/v1", "volumes.yaml": "v1"}
    for name, parsed in docs.items():
        for doc in parsed:
            assert doc["apiVersion"] == versions.get(name, "kubernetes.dask.org/v1"), name
            for c in containers(doc):
                assert c["image"] == f"{REGISTRY}/{IMAGE}", (name, c["name"])  # deploy/Dockerfile's image, pushed
                args = c["args"]
                if c["name"] == "worker":
                    assert args[:2] == ["dask", "worker"] and args[args.index("--nthreads") + 1] == "1"
                elif c["name"] == "scheduler":
                    assert args[:2] == ["dask", "scheduler"] and args[args.index("--port") + 1] == "8786"
    cluster = docs["daskcluster.yaml"][0]
    assert cluster["kind"] == "DaskCluster"
    assert cluster["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == cluster["metadata"]["name"]
    job = docs["daskjob.yaml"][0]
    assert job["kind"] == "DaskJob"
    (driver,) = containers(job["spec"]["job"])
    assert driver["args"][:2] == ["jsmf", "run"]
    config = driver["args"][2]
    assert config.startswith("/opt/jsmf/")  # WORKDIR of the image, which holds pipelines/
    load_run_config(REPO / config.removeprefix("/opt/jsmf/"))  # a shipped, valid config
    assert job["spec"]["cluster"]["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == \
        job["metadata"]["name"]
    # the nightly CronJob: one run at a time, the incremental config, the long-lived cluster's scheduler
    cron = docs["cronjob-nightly.yaml"][0]
    assert cron["kind"] == "CronJob" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    (nightly,) = containers(cron)
    assert nightly["args"][:2] == ["jsmf", "run"]
    cfg = load_run_config(REPO / nightly["args"][2].removeprefix("/opt/jsmf/"))
    assert cfg.stage("ingest")["append"] and cfg.stage("cooccur")["update"]
    assert cfg.stage("fit")[0]["warm_start"] == cfg.stage("fit")[0]["name"]
    env = {e["name"]: e["value"] for e in nightly["env"]}
    service = f"{cluster['metadata']['name']}-scheduler"  # the operator's service name for the DaskCluster
    assert env["DASK_SCHEDULER_ADDRESS"] == f"tcp://{service}:8786"


def _under(path: str, mounts: dict[str, str]) -> bool:
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def test_every_pod_of_a_run_sees_its_root_and_inputs_on_shared_volumes():
    """Workers read the corpus and write C and the models; they mount what the driver mounts, where it mounts it,
    and the config's root and inputs lie on those volumes; every claim is declared ReadWriteMany."""
    docs = _docs()
    claims = {d["metadata"]["name"]: d["spec"]["accessModes"] for d in docs["volumes.yaml"]}
    assert all(modes == ["ReadWriteMany"] for modes in claims.values()), claims
    job = docs["daskjob.yaml"][0]
    (driver_pod,) = _pods(job["spec"]["job"])
    worker_pod = job["spec"]["cluster"]["spec"]["worker"]["spec"]
    cron = docs["cronjob-nightly.yaml"][0]
    (nightly_pod,) = _pods(cron)
    cluster_workers = docs["daskcluster.yaml"][0]["spec"]["worker"]["spec"]
    for driver, workers in ((driver_pod, worker_pod), (nightly_pod, cluster_workers)):
        mounts = _mounts(driver)
        assert mounts and _mounts(workers) == mounts  # same claims at the same paths
        assert set(mounts.values()) <= set(claims)
        (container,) = driver["containers"]
        cfg = load_run_config(REPO / container["args"][2].removeprefix("/opt/jsmf/"))
        in_image = [p.replace(str(REPO), "/opt/jsmf", 1) for p in [cfg.root, *cfg.stage("ingest")["inputs"]]]
        for path in in_image:
            assert _under(path, mounts), (path, mounts)


def test_operator_manifests_validate_against_its_crds():
    """Each DaskCluster and DaskJob against the operator's own openAPIV3Schema (kubernetes.dask.org/v1), as the API
    server checks them on `kubectl apply`."""
    import jsonschema

    crds = {}
    for path in (REPO / "tests" / "data" / "dask-operator-crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        crds[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    checked = 0
    for name, parsed in _docs().items():
        for doc in parsed:
            if doc["apiVersion"] != "kubernetes.dask.org/v1":
                continue
            errors = sorted(jsonschema.Draft7Validator(crds[doc["kind"]]).iter_errors(doc), key=str)
            assert not errors, (name, [f"{list(e.path)}: {e.message}" for e in errors[:5]])
            checked += 1
    assert checked == 2
    # the schema is not vacuous: a field of the wrong type is refused
    bad = _docs()["daskcluster.yaml"][0]
    bad["spec"]["worker"]["replicas"] = "eight"
    assert list(jsonschema.Draft7Validator(crds["DaskCluster"]).iter_errors(bad))


def test_dockerfile_installs_the_package_and_the_configs():
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", text, re.M)
    for path in ("pyproject.toml", "jsmf_dask", "pipelines"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", text, re.M), path
    assert "pip install -c deploy/constraints.txt ." in text and "WORKDIR /opt/jsmf" in text
    assert f"-t {IMAGE}" in text  # the documented build tag is the manifests' image


def test_the_image_installs_exact_versions_within_the_tested_bounds():
    """deploy/Dockerfile installs from deploy/constraints.txt, which pins every dependency of pyproject.toml to one
    version at or above its tested lower bound."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    assert "pip install -c deploy/constraints.txt . s3fs gcsfs" in (DEPLOY / "Dockerfile").read_text()
    pins = {}
    for line in (DEPLOY / "constraints.txt").read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec:
            name, version = spec.split("==")
            pins[name.lower().replace("_", "-")] = Version(version)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for text in [*project["dependencies"], "s3fs", "gcsfs"]:
        req = Requirement(text)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in deploy/constraints.txt (rerun deploy/update_constraints.py)"
        assert req.specifier.contains(pins[name]), (name, str(req.specifier), pins[name])


def test_slurm_recipe_runs_the_cli_with_the_scheduler_variable():
    driver = (DEPLOY / "slurm" / "run_on_slurm.py").read_text()
    compile(driver, "run_on_slurm.py", "exec")
    assert "SLURMCluster" in driver and "DASK_SCHEDULER_ADDRESS=cluster.scheduler_address" in driver
    assert '["jsmf", "run", args.config' in driver
    sbatch = (DEPLOY / "slurm" / "jsmf.sbatch").read_text()
    assert sbatch.startswith("#!/bin/bash") and "deploy/slurm/run_on_slurm.py" in sbatch


def test_connect_takes_the_scheduler_the_operator_hands_the_job(monkeypatch):
    """The Dask operator gives the job pod its scheduler in DASK_SCHEDULER_ADDRESS: connect() with no address
    goes there (here a closed port, so it names the address it tried)."""
    import pytest

    from jsmf_dask.cluster import connect
    from jsmf_dask.exceptions import ClusterError

    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:9")
    with pytest.raises(ClusterError, match=r"tcp://127\.0\.0\.1:9"), connect(connect_timeout=2.0):
        pass


_FAKE_JOBQUEUE = '''
"""A stand-in for dask-jobqueue: SLURMCluster is a local scheduler with no workers (the worker jobs never start),
and every call is logged to $FAKE_SLURM_LOG."""
import json
import os

from distributed import LocalCluster


def _log(entry):
    with open(os.environ["FAKE_SLURM_LOG"], "a") as f:
        f.write(json.dumps(entry) + "\\n")


class SLURMCluster:
    def __init__(self, **kwargs):
        self._cluster = LocalCluster(n_workers=0, dashboard_address=None)
        self.scheduler_address = self._cluster.scheduler_address
        _log({"init": {key: str(value) for key, value in kwargs.items()}})

    def scale(self, jobs):
        _log({"scale": jobs})

    def close(self):
        self._cluster.close()
        _log({"close": True})
'''


def test_slurm_driver_cancelled_closes_its_worker_jobs(tmp_path):
    """scancel sends the driver SIGTERM: it stops `jsmf run` and closes the cluster (which cancels the worker jobs);
    the job sizes come from the sbatch's variables."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    fake = tmp_path / "fake"
    (fake / "dask_jobqueue").mkdir(parents=True)
    (fake / "dask_jobqueue" / "__init__.py").write_text(_FAKE_JOBQUEUE)
    log = tmp_path / "slurm.log"
    config = tmp_path / "run.toml"
    config.write_text(f'root = "{tmp_path / "run"}"\n[ingest]\ninputs = ["{tmp_path / "missing.txt"}"]\n')
    (tmp_path / "missing.txt").write_text("a b c\n")
    env = dict(os.environ, PYTHONPATH=str(fake), FAKE_SLURM_LOG=str(log), JSMF_JOBS="3", JSMF_CORES="1",
               JSMF_MEMORY="2GB", JSMF_WALLTIME="01:00:00", JSMF_LOG_DIRECTORY=str(tmp_path / "logs"),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.pop("SLURM_JOB_ID", None)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    driver = subprocess.Popen([sys.executable, str(DEPLOY / "slurm" / "run_on_slurm.py"), str(config)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (log.exists() and '"scale"' in log.read_text()):
        assert time.monotonic() < deadline and driver.poll() is None, driver.stderr.read() if driver.poll() else ""
        time.sleep(0.1)
    time.sleep(3)  # jsmf run starts and waits for a worker that never comes
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 128 + signal.SIGTERM
    driver.stderr.close()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    init = entries[0]["init"]
    assert (init["cores"], init["processes"], init["memory"], init["walltime"]) == ("1", "1", "2GB", "01:00:00")
    assert init["log_directory"] == str(tmp_path / "logs")  # worker jobs' slurm-JOBID.out, not the driver's cwd
    assert {"scale": 3} in entries and entries[-1] == {"close": True}


def test_plain_dask_recipe_runs_a_config(tmp_path):
    """deploy/dask/run_with_dask.sh: a scheduler and two workers from their own directories, `jsmf run` on them, all
    stopped at the end; the model equals the same config on threads."""
    import os
    import shutil
    import subprocess
    import sys

    import numpy as np

    from jsmf_dask import open_model
    from jsmf_dask.cli import main
    from tests.conftest import REUTERS_DOCWORD, REUTERS_VOCAB

    for src in (REUTERS_DOCWORD, REUTERS_VOCAB):
        shutil.copy(src, tmp_path)
    for name in ("dask", "threads"):
        (tmp_path / f"{name}.toml").write_text(
            f'root = "run-{name}"\n[ingest]\ninputs = ["{REUTERS_DOCWORD.name}"]\nvocab_size = 400\n'
            "[cooccur]\ntile_size = 128\n[[fit]]\ntopics = 5\niterations = 20\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", TMPDIR=str(tmp_path))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    done = subprocess.run(["bash", str(DEPLOY / "dask" / "run_with_dask.sh"), str(tmp_path / "dask.toml"), "2", "2GiB"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 worker(s) of 2GiB" in done.stderr and "3 stage(s) ran" in done.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jsmf-dask.")]  # its scheduler files removed
    assert main(["run", str(tmp_path / "threads.toml"), "--scheduler", "threads", "--quiet"]) == 0
    np.testing.assert_allclose(open_model(str(tmp_path / "run-dask"), "k5-ap").arrays["B"],
                               open_model(str(tmp_path / "run-threads"), "k5-ap").arrays["B"], rtol=0, atol=1e-10)
