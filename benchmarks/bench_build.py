"""Benchmark of ``topo build``: build time, write time and peak memory at several fabric sizes.

A run measures, for one spec with default values except ``gpus`` and ``radix``, four parts, each
in a fresh Python process (so that its peak resident set size, ``ru_maxrss``, belongs to that part
alone, and no part finds caches or compiled templates that another left):

* build and write: ``topo.pipeline.build.build(..., analysis=False, configs=False)``, what
  ``topo build --no-configs --no-analysis`` runs, into a temporary folder: build is the wall time
  of its stage "building" (``build_fabric``; the spec loaded and checked before it), write the rest
  (``plan_cabling``, ``summarize`` and ``build_files`` without switch configs, written by its
  ``OutputFolder``: the design, placement, NCCL, cabling, report and graph files);
* full: wall time of the whole folder, ``topo.pipeline.build.build(..., analysis=False)`` as
  ``topo build --no-analysis`` runs it, in a second process and folder: the fabric built, a
  :class:`~topo.outputs.configs.ConfigJob` started at once (one process per CPU rendering and
  writing the switch configs) while this process writes the rest, and the configs collected in
  order; "configs add" is full minus build + write;
* floor: the least a program can take to write the same bytes into the same files, in a third
  process right after the full folder: it makes each folder of the full folder once in a fresh
  folder and writes every file's bytes into it, nothing else (only the writes are timed, not the
  reading of each file beforehand from the page cache); the full folder is compared with the
  folder without configs and with this floor run by run (the disk's speed drifts between runs);
* ready: the whole folder again, in a last process and folder, with its switch and host
  configs read into memory beforehand (not timed) and handed to ``build_files`` ready-made: as
  many forked processes as the config job has write and hash the switches' files with the config
  processes' own functions while this process writes the rest (:class:`PrerenderedConfigs`). The
  same bytes as the full folder, written by the same code, with no facts made and nothing
  rendered: the least the whole folder could take if rendering the configs cost nothing;
* topo build: wall time of the whole command as a user runs it (``topo build --gpus N --radix R -q``,
  Python's start, the analysis and the design review included), with ``--no-configs`` and without;
* each part starts after ``os.sync()`` (not timed), so that none pays for the writing back of what
  the parts before it wrote;
* baseline RSS: peak RSS after the imports, before any work;
* peak RSS: peak RSS of the process that wrote the folder without configs (absolute, nothing
  subtracted); full peak RSS: that of the process that wrote the whole folder, and the largest
  of its config processes;
* full CPU: user + system seconds of the process that wrote the whole folder and of its config
  processes (``getrusage``), and the system seconds alone (the kernel's share: creating and
  writing the files).

The results are printed on stdout as a Markdown table, followed by PASS/MISS for each target;
progress goes to stderr. With ``--write-docs`` the section between the markers
``<!-- build-bench:start -->`` and ``<!-- build-bench:end -->`` of ``docs/performance.md`` is
replaced by the table, the target results and a description of the machine.

Usage::

    python benchmarks/bench_build.py [--sizes GPUS[:RADIX] ...] [--repeat N] [--write-docs]

This is a benchmark, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
START = "<!-- build-bench:start -->"
END = "<!-- build-bench:end -->"

#: (gpus, radix) measured by default. Radix 64 holds at most 65,536 GPUs in three tiers.
DEFAULT_SIZES = ("1024:64", "16384:64", "65536:64", "131072:128")
DEFAULT_RADIX = 64

#: Targets: on a 2-core machine, this many GPUs (radix 64) built in at most this many seconds
#: (build + write, median of the runs) with at most this peak memory.
TARGET_GPUS = 65536
TARGET_RADIX = 64
TARGET_SECONDS = 3.0
TARGET_BYTES = 1.5e9  # 1.5 GB
TARGET_CORES = 2


# --- the child: one size, one run ------------------------------------------------------------


def _maxrss_kib(children: bool = False) -> int:
    """Peak RSS of this process (of its largest finished child with ``children``), in KiB."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KiB on Linux


def child(part: str, gpus: int, radix: int, tmp: str) -> None:
    """Measure one part of a run in this (fresh) process and print its results as one JSON line.

    ``plain``: the folder without configs into ``tmp/design``; ``full``: the whole folder into
    ``tmp/full``; ``floor``: the write floor of ``tmp/full`` into ``tmp/floor``."""
    sys.path.insert(0, str(ROOT))  # measure this source tree
    import time

    from topo.fabric import build_fabric
    from topo.cabling import plan_cabling
    from topo.summary import summarize
    from topo.outputs.writer import OutputFolder
    from topo.pipeline.build import build, build_files
    from topo.spec import load_spec
    import topo.addressing, topo.pipeline.apart, topo.pipeline.design, topo.sizing  # noqa: E401,F401 (what build()
    # imports when it runs: loaded before the clock starts, as the rest)

    root = Path(tmp)
    baseline = _maxrss_kib()
    prerendered = PrerenderedConfigs.read(root / "full") if part == "ready" else None
    os.sync()  # what the parts before this one wrote is on the disk: this part does not pay for it
    if part == "floor":
        print(json.dumps({"floor_s": write_floor(root, ("full",), root / "floor")}))
        return
    import resource

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if part == "plain":  # topo build --no-analysis --no-configs
        times = StageTimes()
        fabric = build(None, {"gpus": gpus, "radix": radix}, root / "design", analysis=False, configs=False,
                       progress=times).fabric
        start, built, written = times.started["building"], times.ended["building"], time.perf_counter()
        print(json.dumps({
            "gpus": gpus, "radix": radix, "tiers": fabric.plan.tiers,
            "switches": int((fabric.tier > 0).sum()), "links": len(fabric.links),
            "build_s": built - start, "write_s": written - built,
            "baseline_kib": baseline, "peak_kib": _maxrss_kib(),
            "design_bytes": (root / "design" / "design.json").stat().st_size,
        }))
        return
    if part == "ready":  # the whole folder again, its configs' bytes ready: only written
        fabric = build_fabric(load_spec({"gpus": gpus, "radix": radix}))
        cabling = plan_cabling(fabric)
        with OutputFolder(root / "ready") as folder:
            job = prerendered.start(os.cpu_count() or 1, folder.tmp)
            folder.write(build_files(fabric, summarize(fabric, cabling), cabling=cabling, sink=folder.tmp,
                                     config_job=job))
        ready_s = time.perf_counter() - start
        cpu1, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        print(json.dumps({
            "ready_s": ready_s,
            "ready_cpu_s": cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime,
            "ready_writers_cpu_s": workers.ru_utime + workers.ru_stime,
        }))
        return
    # topo build --no-analysis: the config processes start right after the fabric is built and
    # write the switch configs while this one writes the rest
    count = build(None, {"gpus": gpus, "radix": radix}, root / "full", analysis=False,
                  jobs=os.cpu_count() or 1).files
    full_s = time.perf_counter() - start
    cpu1, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    configs = [p for name in ("switches", "hosts") for p in (root / "full" / name).rglob("*") if p.is_file()]
    print(json.dumps({
        "full_s": full_s, "full_files": count, "full_peak_kib": _maxrss_kib(),
        "worker_peak_kib": _maxrss_kib(children=True),
        # CPU seconds (user + system) of this process and of the config processes
        "full_cpu_s": cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime,
        "config_cpu_s": workers.ru_utime + workers.ru_stime,
        "full_sys_s": cpu1.ru_stime - cpu0.ru_stime + workers.ru_stime,  # of which system time (both)
        "config_files": len(configs), "config_bytes": sum(p.stat().st_size for p in configs),
    }))


class StageTimes:
    """A progress of the pipeline (:class:`topo.pipeline.progress.Progress`) that keeps when each
    stage started and ended, by its first word (``building``), and says nothing."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, what: str) -> Iterator[None]:
        import time

        self.started[what.split()[0]] = time.perf_counter()
        yield
        self.ended[what.split()[0]] = time.perf_counter()

    def counter(self, what: str, total: int) -> Callable[[int], None]:
        return lambda done: None

    def say(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


class PrerenderedConfigs:
    """The switch and host configs of a built folder, read into memory, handed to ``build_files``
    in place of a :class:`~topo.outputs.configs.ConfigJob`: what the whole folder would take if
    rendering the configs (and making their facts) took no time at all.

    :meth:`start` forks as many writer processes as the config job has; each writes every
    other chunk of switches (``CONFIG_CHUNK`` of them, in turn) into the temporary folder with the
    config processes' own ``write_file`` and ``digest``, and sends back their sizes and digests
    when it has written them all. The host files are handed out as text, as the job does."""

    def __init__(self, switches: list[list[tuple[str, bytes]]], hosts: list[tuple[str, str]]) -> None:
        self.switches, self.hosts = switches, hosts
        self.writers: list[tuple[int, int]] = []  # (pid, read end of its pipe)

    @classmethod
    def read(cls, folder: Path) -> "PrerenderedConfigs":
        def each(name: str) -> list[Path]:  # none for an InfiniBand fabric
            return sorted((folder / name).iterdir()) if (folder / name).is_dir() else []

        switches = [[(f"switches/{d.name}/{f.name}", f.read_bytes()) for f in sorted(d.iterdir())]
                    for d in each("switches")]
        hosts = [(f"hosts/{f.name}", f.read_text(encoding="utf-8")) for f in each("hosts")]
        return cls(switches, hosts)

    def start(self, writers: int, sink: Path) -> "PrerenderedConfigs":
        from topo.outputs.configs import CONFIG_CHUNK
        from topo.outputs.manifest import digest
        from topo.outputs.writer import write_file

        chunks = [self.switches[i:i + CONFIG_CHUNK] for i in range(0, len(self.switches), CONFIG_CHUNK)]
        for w in range(writers):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # a writer: its chunks, then their digests up the pipe
                code = 1  # a writer never returns into the benchmark's code: it exits, 1 on any error
                try:
                    os.close(read)
                    made: set[str] = set()
                    done = []
                    for chunk in chunks[w::writers]:
                        for switch in chunk:
                            for rel, data in switch:
                                write_file(sink, rel, data, made)
                                done.append((rel, len(data), digest(data)))
                    with os.fdopen(write, "w", encoding="utf-8") as out:
                        json.dump(done, out)
                    code = 0
                except BaseException as exc:
                    print(f"bench_build: a writer of the ready-made configs failed: {exc}", file=sys.stderr)
                finally:
                    os._exit(code)
            os.close(write)
            self.writers.append((pid, read))
        return self

    def files(self, progress=None):
        """Every switch's files in fabric order (once the writers are done), then the host files."""
        from topo.outputs.manifest import Written

        written = {}
        for pid, read in self.writers:
            with os.fdopen(read, encoding="utf-8") as got:
                text = got.read()
            _, status = os.waitpid(pid, 0)
            if status:
                raise SystemExit(f"bench_build: a writer of the ready-made configs failed (wait status {status})")
            written.update((rel, Written(sha, size)) for rel, size, sha in json.loads(text))
        for switch in self.switches:
            for rel, _ in switch:
                yield rel, written[rel]
        yield from self.hosts


def write_floor(root: Path, folders: tuple[str, ...], out: Path) -> float:
    """Seconds to write every file of ``root/<folder>`` again under ``out``, as plainly as Python
    can: make each folder once, write the file's bytes (read beforehand, not timed). The least any
    build of the same files on the same disk can take."""
    import time

    files = [p for name in folders for p in sorted((root / name).rglob("*")) if p.is_file()]
    made: set[Path] = set()
    seconds = 0.0
    for path in files:
        data = path.read_bytes()
        target = out / path.relative_to(root)
        start = time.perf_counter()
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        with open(target, "wb") as f:
            f.write(data)
        seconds += time.perf_counter() - start
    return seconds


def startup() -> tuple[float, float]:
    """Median wall seconds of ``topo --version`` and of a bare ``python -c pass`` (9 runs each)."""
    import time

    def wall(cmd: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        return time.perf_counter() - start

    topo = statistics.median(wall([sys.executable, "-m", "topo.cli", "--version"]) for _ in range(9))
    bare = statistics.median(wall([sys.executable, "-c", "pass"]) for _ in range(9))
    return topo, bare


# --- the parent: runs, table, targets, docs --------------------------------------------------


@dataclass
class Size:
    gpus: int
    radix: int
    runs: list[dict]

    def times(self, key: str) -> list[float]:
        return [run[key] for run in self.runs]

    def total(self) -> list[float]:
        return [run["build_s"] + run["write_s"] for run in self.runs]

    def full(self) -> list[float]:
        return [run["full_s"] for run in self.runs]

    @property
    def first(self) -> dict:
        return self.runs[0]

    @property
    def peak_kib(self) -> int:
        return max(run["peak_kib"] for run in self.runs)

    @property
    def baseline_kib(self) -> int:
        return max(run["baseline_kib"] for run in self.runs)


def parse_size(text: str) -> tuple[int, int]:
    gpus, _, radix = text.partition(":")
    try:
        return int(gpus.replace(",", "").replace("_", "")), int(radix) if radix else DEFAULT_RADIX
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPUS or GPUS:RADIX, got {text!r}") from None


def run_once(gpus: int, radix: int, scratch: Path) -> dict:
    """One run: the folder without configs, the whole folder and its write floor, each part in a
    fresh process, then the whole ``topo build`` without and with configs, in a new folder under
    ``scratch``."""
    import tempfile
    import time

    def run(args: list[str], what: str) -> str:
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            raise SystemExit(f"bench_build: {gpus:,} GPUs at radix {radix}, {what} failed (exit {proc.returncode})")
        return proc.stdout

    result: dict = {}
    tmp = tempfile.mkdtemp(prefix=f"{gpus}-", dir=scratch)
    for part in ("plain", "full", "floor", "ready"):
        out = run([str(Path(__file__).resolve()), "--child", part, str(gpus), str(radix), tmp], f"part {part}")
        result.update(json.loads(out.strip().splitlines()[-1]))
    # the whole command as a user runs it (Python's start, the analysis and the design review
    # included), without and with the configs
    for key, extra in (("command_plain_s", ["--no-configs"]), ("command_full_s", [])):
        os.sync()
        start = time.perf_counter()
        run(["-m", "topo.cli", "build", "--gpus", str(gpus), "--radix", str(radix), "-q",
             "-o", str(Path(tmp) / key), *extra], " ".join(["topo build", *extra]))
        result[key] = time.perf_counter() - start
    return result


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f}"


def table(sizes: list[Size]) -> str:
    headers = [
        "GPUs", "radix", "tiers", "switches", "links",
        "build best (s)", "build median (s)", "write best (s)", "write median (s)",
        "total median (s)", "baseline RSS (MiB)", "peak RSS (MiB)", "full peak RSS: main / config process (MiB)",
        "design.json (MB)",
        "configs add (s)", "config files (MB)", "full folder median (s)", "full CPU: main + config processes (s)",
        "write floor median (s)", "configs ready-made median (s)",
        "full / no configs", "full / floor", "ready-made / no configs", "topo build: --no-configs / with configs (s)", "topo build ratio",
    ]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
    for s in sizes:
        build, write = s.times("build_s"), s.times("write_s")
        row = [
            f"{s.gpus:,}", str(s.radix), str(s.first["tiers"]), f"{s.first['switches']:,}",
            f"{s.first['links']:,}",
            f"{min(build):.2f}", f"{statistics.median(build):.2f}",
            f"{min(write):.2f}", f"{statistics.median(write):.2f}",
            f"{statistics.median(s.total()):.2f}",
            mib(s.baseline_kib), mib(s.peak_kib),
            f"{mib(max(s.times('full_peak_kib')))} / {mib(max(s.times('worker_peak_kib')))}",
            f"{s.first['design_bytes'] / 1e6:,.1f}",
            f"{statistics.median(f - t for f, t in zip(s.full(), s.total(), strict=True)):.2f}",
            f"{s.first['config_files']:,} ({s.first['config_bytes'] / 1e6:,.0f})",
            f"{statistics.median(s.full()):.2f}",
            f"{statistics.median(s.times('full_cpu_s')):.2f} + {statistics.median(s.times('config_cpu_s')):.2f}",
            f"{statistics.median(s.times('floor_s')):.2f}",
            f"{statistics.median(s.times('ready_s')):.2f}",
            f"{statistics.median(f / t for f, t in zip(s.full(), s.total(), strict=True)):.1f}x",
            f"{statistics.median(f / r['floor_s'] for f, r in zip(s.full(), s.runs, strict=True)):.1f}x",
            f"{statistics.median(r['ready_s'] / t for r, t in zip(s.runs, s.total(), strict=True)):.1f}x",
            f"{statistics.median(s.times('command_plain_s')):.2f} / {statistics.median(s.times('command_full_s')):.2f}",
            f"{statistics.median(r['command_full_s'] / r['command_plain_s'] for r in s.runs):.1f}x",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def targets(sizes: list[Size]) -> list[str]:
    """PASS/MISS lines for the targets (SKIP when the target size was not measured)."""
    limit_mib = TARGET_BYTES / 1024**2
    what_time = f"{TARGET_GPUS:,} GPUs (radix {TARGET_RADIX}) built in <= {TARGET_SECONDS:g} s"
    what_mem = f"{TARGET_GPUS:,} GPUs (radix {TARGET_RADIX}) peak RSS <= 1.5 GB ({limit_mib:,.0f} MiB)"
    match = [s for s in sizes if s.gpus == TARGET_GPUS and s.radix == TARGET_RADIX]
    if not match:
        return [f"- SKIP: {what_time} (size not measured)", f"- SKIP: {what_mem} (size not measured)"]
    s = match[0]
    build = statistics.median(s.times("build_s"))
    peak_bytes = s.peak_kib * 1024
    lines = [
        f"- {'PASS' if build <= TARGET_SECONDS else 'MISS'}: {what_time}: median {build:.2f} s "
        f"(the fabric: spec, sizing, arrays and addresses)",
        f"- {'PASS' if peak_bytes <= TARGET_BYTES else 'MISS'}: {what_mem}: highest peak of "
        f"{len(s.runs)} runs {mib(s.peak_kib)} MiB",
        f"- for reference (no target): the whole design folder without switch configs takes "
        f"{statistics.median(s.total()):.2f} s (median, build + write); the whole folder "
        f"{statistics.median(s.full()):.2f} s",
    ]
    cores = os.cpu_count()
    lines += folder_targets(sizes)
    if cores != TARGET_CORES:
        lines.append(
            f"- note: the targets are set for a {TARGET_CORES}-core machine; this one has {cores} cores"
        )
    return lines


#: The whole design folder (configs included): at 65,536 GPUs within this factor of the folder
#: without configs and of the write floor; at 131,072 GPUs (radix 128) within this many seconds.
FOLDER_FACTOR = 2.0
FOLDER_131K_SECONDS = 15.0


def folder_targets(sizes: list[Size]) -> list[str]:
    lines = []
    for s in sizes:
        full = statistics.median(s.full())
        if s.gpus == TARGET_GPUS and s.radix == TARGET_RADIX:
            for what, bases in (("the folder without configs", s.total()), ("the write floor", s.times("floor_s"))):
                # the median of each run's own ratio: the disk's speed drifts between runs
                ratio = statistics.median(f / b for f, b in zip(s.full(), bases, strict=True))
                lines.append(f"- {'PASS' if ratio <= FOLDER_FACTOR else 'MISS'}: {s.gpus:,} GPUs, the whole design "
                             f"folder within {FOLDER_FACTOR:g}x of {what}: {ratio:.1f}x (median of the runs' "
                             f"ratios; medians {full:.2f} s against {statistics.median(bases):.2f} s)")
            # the same target read for the whole command (the analysis and the review included)
            ratio = statistics.median(r["command_full_s"] / r["command_plain_s"] for r in s.runs)
            lines.append(f"- {'PASS' if ratio <= FOLDER_FACTOR else 'MISS'}: {s.gpus:,} GPUs, `topo build` (the "
                         f"analysis and the design review included) within {FOLDER_FACTOR:g}x of `topo build "
                         f"--no-configs`: {ratio:.1f}x (median of the runs' ratios; medians "
                         f"{statistics.median(s.times('command_full_s')):.2f} s against "
                         f"{statistics.median(s.times('command_plain_s')):.2f} s)")
            # what the disk alone allows: the floor writes the same bytes and nothing else
            floor_ratio = statistics.median(r["floor_s"] / t for r, t in zip(s.runs, s.total(), strict=True))
            lines.append(f"- for reference: on this disk the write floor alone is {floor_ratio:.1f}x the folder "
                         f"without configs (median of the runs' ratios)")
            # what writing the configs alone allows: the same folder with their bytes ready-made
            ready = statistics.median(r["ready_s"] / t for r, t in zip(s.runs, s.total(), strict=True))
            lines.append(f"- for reference: the whole folder with its configs ready-made (read into memory "
                         f"beforehand; written and hashed by as many processes as render them, nothing "
                         f"rendered) is {ready:.1f}x the folder without configs (median of the runs' ratios; "
                         f"median {statistics.median(s.times('ready_s')):.2f} s, "
                         f"{statistics.median(r['ready_cpu_s'] + r['ready_writers_cpu_s'] for r in s.runs):.2f} "
                         f"CPU-seconds): rendering the configs can only add to that")
            # what the cores alone allow: the CPU seconds the whole folder took, spread over them all
            cpu = [r["full_cpu_s"] + r["config_cpu_s"] for r in s.runs]
            cores = os.cpu_count() or 1
            cpu_ratio = statistics.median(c / cores / t for c, t in zip(cpu, s.total(), strict=True))
            lines.append(f"- for reference: the whole folder took {statistics.median(cpu):.2f} CPU-seconds (this "
                         f"process and the config processes, median; "
                         f"{statistics.median(s.times('full_sys_s')):.2f} of them system time, the kernel's), "
                         f"at least {statistics.median(cpu) / cores:.2f} s "
                         f"of wall time on {cores} cores even if every one of them were busy throughout: "
                         f"{cpu_ratio:.1f}x the folder without configs")
        if s.gpus == 131072 and s.radix == 128:
            ok = full <= FOLDER_131K_SECONDS
            lines.append(f"- {'PASS' if ok else 'MISS'}: 131,072 GPUs (radix 128), the whole design folder in "
                         f"under {FOLDER_131K_SECONDS:g} s: median {full:.2f} s (its write floor alone: median "
                         f"{statistics.median(s.times('floor_s')):.2f} s)")
    return lines


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> list[str]:
    """The machine and the library versions, as Markdown list items (shared with bench_analyze)."""
    import networkx
    import numpy
    import scipy

    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores (`os.cpu_count()`)",
        f"- OS: {platform.system()} ({platform.machine()})",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"numpy {numpy.__version__}, scipy {scipy.__version__}, networkx {networkx.__version__}",
    ]


def disk(path: str) -> str:
    """The file system that ``path`` is on, as a Markdown list item: its type from ``/proc/mounts``
    (Linux), and for ext4 whether it has a journal (without one, ext4 skips over
    inodes freed in the last minutes when it makes files, so removing many files just before a
    run makes its writes slower: docs/performance.md)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split()[:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return f"- Disk where the runs write: not known on {platform.system()}"
    real = os.path.realpath(path)
    device, point, kind = max((m for m in mounts if real == m[1] or real.startswith(m[1].rstrip("/") + "/")),
                              key=lambda m: len(m[1]), default=("?", "/", "?"))
    journal = ""
    if kind == "ext4":
        try:
            task = Path(f"/sys/fs/ext4/{os.path.basename(device)}/journal_task").read_text().strip()
            journal = ", without a journal" if task == "<none>" else ", with a journal"
        except OSError:
            pass
    return f"- Disk where the runs write: {kind}{journal}"


def command(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/bench_build.py"]
    if [f"{g}:{r}" for g, r in args.sizes] != list(DEFAULT_SIZES):
        parts.append("--sizes " + " ".join(f"{g}:{r}" for g, r in args.sizes))
    if args.repeat != 3:
        parts.append(f"--repeat {args.repeat}")
    return " ".join(parts + ["--write-docs"])


def docs_section(args: argparse.Namespace, body: str, checks: list[str]) -> str:
    today = datetime.date.today().isoformat()
    return "\n".join(
        [
            f"Measured on {today} with `{command(args)}` ({args.repeat} runs per size, each in a "
            "fresh process; times are wall-clock seconds, memory is the process's peak resident "
            "set size).",
            "",
            body,
            "",
            "Targets:",
            "",
            *checks,
            "",
            "Machine:",
            "",
            *machine(),
            disk(args.scratch),
        ]
    )


def replace_section(doc: Path, start: str, end: str, section: str) -> None:
    """Put ``section`` between the markers ``start`` and ``end`` of ``doc`` (the benchmarks'
    --write-docs); exit with a message when the markers are missing."""
    text = doc.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{Path(sys.argv[0]).name}: markers {start} ... {end} not found in {doc.name}")
    doc.write_text(pattern.sub(lambda _: f"{start}\n{section}\n{end}", text, count=1), encoding="utf-8")


def write_docs(section: str) -> None:
    replace_section(DOC, START, END, section)


def measure(args: argparse.Namespace, scratch: Path) -> list[Size]:
    """Every run of every size, in order."""
    sizes = []
    for gpus, radix in args.sizes:
        runs = []
        for i in range(args.repeat):
            print(f"bench: {gpus:,} GPUs, radix {radix}, run {i + 1}/{args.repeat} ...", end="",
                  file=sys.stderr, flush=True)
            run = run_once(gpus, radix, scratch)
            print(f" build {run['build_s']:.2f} s, write {run['write_s']:.2f} s, "
                  f"full {run['full_s']:.2f} s, ready-made {run['ready_s']:.2f} s, "
                  f"floor {run['floor_s']:.2f} s, topo build "
                  f"{run['command_plain_s']:.2f} / {run['command_full_s']:.2f} s, "
                  f"peak {mib(run['peak_kib'])} MiB", file=sys.stderr, flush=True)
            runs.append(run)
        sizes.append(Size(gpus, radix, runs))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark topo build (build time, write time, peak memory) per fabric size.",
    )
    parser.add_argument(
        "--sizes", nargs="+", type=parse_size, metavar="GPUS[:RADIX]",
        default=[parse_size(s) for s in DEFAULT_SIZES],
        help=f"fabric sizes, radix {DEFAULT_RADIX} unless given [{' '.join(DEFAULT_SIZES)}]",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per size [3]")
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the measured section of docs/performance.md")
    parser.add_argument("--child", nargs=4, metavar=("PART", "GPUS", "RADIX", "TMP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        part, gpus, radix, tmp = args.child
        child(part, int(gpus), int(radix), tmp)
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    import shutil
    import tempfile

    # every run's folders are removed at the end, not between runs, so that no run's writes share
    # the disk with the removal of the run before it
    scratch = Path(tempfile.mkdtemp(prefix="topo-bench-"))
    args.scratch = str(scratch)
    try:
        sizes = measure(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    body = table(sizes)
    checks = targets(sizes)
    topo_s, bare_s = startup()
    checks.append(f"- {'PASS' if topo_s <= 5 * bare_s else 'MISS'}: `topo --version` within 5x of a bare Python "
                  f"start: median {topo_s:.2f} s against {bare_s:.2f} s ({topo_s / bare_s:.1f}x)")
    print(body)
    print()
    print("\n".join(checks))
    if args.write_docs:
        write_docs(docs_section(args, body, checks))
        print("bench: updated docs/performance.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
