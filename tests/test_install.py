"""A plain (non-editable) install finds the packaged templates and data and runs the main job."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from .conftest import ROOT


@pytest.mark.slow
def test_wheel_install_runs_the_main_job(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True,
    )
    if build.returncode != 0 and "Could not find a version that satisfies" in build.stderr:
        pytest.skip("no package index reachable to fetch the build backend")
    assert build.returncode == 0, build.stderr
    wheel = next(wheels.glob("topo-*.whl"))
    env_dir = tmp_path / "venv"
    # A fresh environment whose dependencies come from the environment running the tests (a venv
    # or not): its site folders are listed in a .pth file, which adds them to sys.path after the
    # new environment's own site-packages without running their .pth files, so an editable install
    # of topo there is not seen. The project itself comes only from the wheel, installed by this
    # pip into the new environment (which may have no pip of its own, as where ensurepip is missing).
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site, "outer-site-packages.pth").write_text("".join(f"{folder}\n" for folder in outer))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(python), "-c", "import topo.outputs.templating as t; print(t.packaged_template_dir())"],
        cwd=work, capture_output=True, text=True, check=True, env=clean_env,
    ).stdout.strip()
    assert str(env_dir) in where and (Path(where) / "summary.md.j2").is_file()
    run = subprocess.run(
        [str(env_dir / "bin" / "topo"), "build", "--gpus", "1024", "-q"],
        cwd=work, capture_output=True, text=True, env=clean_env,
    )
    assert run.returncode == 0, run.stderr
    assert (work / "cluster-1024gpus" / "README.md").read_text().startswith("# cluster: 1,024 GPUs")
