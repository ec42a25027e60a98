#!/usr/bin/env python3
"""The mutation campaign of the unit tests (test/mutation/README.md).

Copies the working tree (tracked and untracked-but-not-ignored files, as they
are now) to a scratch folder, builds the four unit test programs there, and
for each mutation of test/mutation/mutations.txt: applies it to the scratch
copy, rebuilds, runs `ctest -L unit`, and puts the file back. A mutation is
"killed" when a unit test fails (or times out), "survived" when they all pass.
The working tree itself is never written to.

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TARGETS = ["steadfast_unit_tests", "steadfast_threaded_unit_tests", "steadfast_transport_unit_tests",
           "steadfast_app_unit_tests", "steadfast_db_threaded_tests"]
KILLED, SURVIVED, NO_APPLY, NO_COMPILE = "killed", "survived", "does-not-apply", "does-not-compile"
STATUSES = (KILLED, SURVIVED, NO_APPLY, NO_COMPILE)
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
KEYS = ("id", "file", "why")


# ---------------------------------------------------------------- the list

class ListError(Exception):
    pass


@dataclass
class Mutation:
    id: str
    file: str
    why: str
    find: str
    replace: str
    line: int  # of its "## id:" line in the list


def parse_list(path: Path) -> list[Mutation]:
    """Blocks of "## key: value" lines and "--- find" / "--- replace" sections.

    A section runs to the next "--- " marker or "## " line (or the end);
    its trailing blank lines are dropped. Everything before the first
    "## id:" line is a comment."""
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.split("\n")
    out: list[Mutation] = []
    seen: dict[str, int] = {}
    block: dict | None = None
    section: str | None = None
    buf: list[str] = []

    def where(n: int) -> str:
        return f"{path}:{n}"

    def flush_section() -> None:
        nonlocal section, buf
        if section is None:
            return
        while buf and buf[-1].strip() == "":
            buf.pop()
        if section in block:
            raise ListError(f"{where(block['line'])}: mutation {block.get('id')!r} has two '--- {section}' sections")
        block[section] = "\n".join(buf)
        section, buf = None, []

    def finish_block() -> None:
        nonlocal block
        if block is None:
            return
        flush_section()
        n = block["line"]
        for key in KEYS + ("find", "replace"):
            if key not in block:
                what = f"'## {key}:' line" if key in KEYS else f"'--- {key}' section"
                raise ListError(f"{where(n)}: mutation {block.get('id')!r} has no {what}")
        if not block["find"].strip():
            raise ListError(f"{where(n)}: mutation {block['id']!r}: its find is empty")
        if block["find"] == block["replace"]:
            raise ListError(f"{where(n)}: mutation {block['id']!r}: find and replace are the same")
        out.append(Mutation(block["id"], block["file"], block["why"], block["find"], block["replace"], n))
        block = None

    for n, line in enumerate(lines, 1):
        if line.startswith("## "):
            m = re.match(r"^## ([a-z]+):\s*(.*?)\s*$", line)
            if not m:
                if block is None:
                    continue  # the comment before the first block
                raise ListError(f"{where(n)}: expected '## key: value', got {line!r}")
            key, value = m.group(1), m.group(2)
            if key == "id":
                finish_block()
                if not ID_RE.match(value):
                    raise ListError(f"{where(n)}: bad id {value!r} (lower case letters, digits, '.', '_', '-')")
                if value in seen:
                    raise ListError(f"{where(n)}: id {value!r} already used at line {seen[value]}")
                seen[value] = n
                block = {"id": value, "line": n}
                continue
            if block is None:
                continue
            if key not in KEYS:
                raise ListError(f"{where(n)}: unknown key {key!r} (known: {', '.join(KEYS)})")
            flush_section()
            if key in block:
                raise ListError(f"{where(n)}: mutation {block['id']!r} has two '## {key}:' lines")
            if not value:
                raise ListError(f"{where(n)}: '## {key}:' is empty")
            if key == "file" and (value.startswith("/") or ".." in Path(value).parts):
                raise ListError(f"{where(n)}: the file must be relative to the repository's root: {value!r}")
            block[key] = value
            continue
        if line.startswith("---"):
            if block is None:
                continue
            m = re.match(r"^--- (find|replace)\s*$", line)
            if not m:
                raise ListError(f"{where(n)}: expected '--- find' or '--- replace', got {line!r}")
            flush_section()
            if m.group(1) == "replace" and "find" not in block:
                raise ListError(f"{where(n)}: '--- replace' before '--- find'")
            section, buf = m.group(1), []
            continue
        if section is not None:
            buf.append(line)
        elif block is not None and line.strip():
            raise ListError(f"{where(n)}: text outside a find or replace section: {line!r}")
    finish_block()
    if not out:
        raise ListError(f"{path}: no mutations")
    return out


# ---------------------------------------------------------- the scratch copy

def run_git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True).stdout.decode(
        "utf-8", "surrogateescape")


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def source_files(root: Path, skip: list[Path]) -> list[str]:
    """Tracked files and untracked ones that are not ignored, relative to root."""
    names = run_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    out = []
    for rel in sorted(set(n for n in names if n)):
        p = root / rel
        if any(within(p, s) for s in skip):
            continue
        out.append(rel)
    return out


def sync_tree(root: Path, scratch: Path, names: list[str]) -> tuple[int, int, int]:
    """Makes scratch hold exactly `names` as they are in root. A file whose
    content is already there keeps its time (nothing to rebuild); any other is
    written anew (a newer time: Ninja rebuilds what it feeds, also a file
    left mutated by an interrupted run). Returns (written, unchanged, removed)."""
    scratch.mkdir(parents=True, exist_ok=True)
    written = unchanged = removed = 0
    wanted: set[str] = set()
    for rel in names:
        src, dst = root / rel, scratch / rel
        if src.is_symlink():
            target = os.readlink(src)
            if dst.is_symlink() and os.readlink(dst) == target:
                unchanged += 1
            else:
                if dst.is_symlink() or dst.is_file():
                    dst.unlink()
                elif dst.is_dir():
                    shutil.rmtree(dst)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, dst)
                written += 1
        elif src.is_file():
            data = src.read_bytes()
            if dst.is_file() and not dst.is_symlink() and dst.read_bytes() == data:
                unchanged += 1
            else:
                if dst.is_symlink():
                    dst.unlink()
                elif dst.is_dir():
                    shutil.rmtree(dst)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data)
                written += 1
            shutil.copymode(src, dst)
        else:
            continue  # deleted in the working tree, or a submodule
        wanted.add(Path(rel).as_posix())
    for folder, dirs, files in os.walk(scratch, topdown=False):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = Path(folder) / name
            rel = full.relative_to(scratch).as_posix()
            if rel not in wanted:
                full.unlink()
                removed += 1
        for d in dirs:
            full = Path(folder) / d
            if not full.is_symlink() and full.is_dir() and not any(full.iterdir()):
                full.rmdir()
    return written, unchanged, removed


# --------------------------------------------------------- building, testing

@dataclass
class Runner:
    root: Path
    scratch: Path
    build: Path
    jobs: int
    test_jobs: int
    timeout: int
    nice: int
    env: dict = field(default_factory=dict)
    suite_timeout: float | None = None

    def prefix(self) -> list[str]:
        return ["nice", "-n", str(self.nice)] if self.nice and shutil.which("nice") else []

    def configure(self) -> None:
        env = dict(os.environ)
        env.update(CCACHE_BASEDIR=str(self.scratch), CCACHE_NOHASHDIR="1", CCACHE_DEPEND="1")
        if shutil.which("clang++"):
            env["CXX"] = "clang++"
            if shutil.which("clang"):
                env["CC"] = "clang"
        self.env = env
        cxx = shutil.which(env.get("CXX", "c++")) or env.get("CXX", "c++")
        cache = self.build / "CMakeCache.txt"
        if cache.is_file():
            # A tree configured with another compiler or generator (CMake
            # keeps the first) starts afresh, as in .ci/test.
            text = cache.read_text(errors="replace")
            have = re.search(r"^CMAKE_CXX_COMPILER:[A-Z]*=(.*)$", text, re.M)
            gen = re.search(r"^CMAKE_GENERATOR:INTERNAL=(.*)$", text, re.M)
            src = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", text, re.M)
            stale = (have and have.group(1) and os.path.realpath(have.group(1)) != os.path.realpath(cxx)) or \
                    (gen and gen.group(1) != "Ninja") or \
                    (src and os.path.realpath(src.group(1)) != os.path.realpath(self.scratch))
            if stale:
                print(f"(the build folder {self.build} was configured otherwise: starting it afresh)", flush=True)
                shutil.rmtree(self.build)
        lld = shutil.which("ld.lld")
        cmd = ["cmake", "-G", "Ninja", "-S", str(self.scratch), "-B", str(self.build), "-DCMAKE_BUILD_TYPE=Debug",
               "-DCMAKE_CXX_FLAGS_DEBUG=-O0", "-DSTEADFAST_BUILD_TESTS=ON", "-DSTEADFAST_BUILD_APPS=ON",
               "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld" if lld else "-DCMAKE_EXE_LINKER_FLAGS="]
        print(f"compiler: {cxx}; linker: {'lld' if lld else 'the default'}; ccache: "
              f"{shutil.which('ccache') or 'not found'}", flush=True)
        print("configuring: " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.stdout.write(r.stdout.decode(errors="replace")[-6000:])
            raise SystemExit("error: cmake could not configure the scratch copy (above)")

    def build_targets(self) -> tuple[bool, str]:
        cmd = self.prefix() + ["cmake", "--build", str(self.build), "-j", str(self.jobs), "--target", *TARGETS]
        r = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return r.returncode == 0, r.stdout.decode(errors="replace")

    def run_tests(self) -> tuple[bool, list[tuple[str, str]], str, float]:
        """(all passed, [(test, why)] of those that did not, output, seconds)."""
        cmd = self.prefix() + ["ctest", "-L", "unit", "--timeout", str(self.timeout), "-j", str(self.test_jobs),
                               "--output-on-failure", "--no-tests=error"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, cwd=self.build, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        watchdog = False
        try:
            raw, _ = p.communicate(timeout=self.suite_timeout)
        except subprocess.TimeoutExpired:
            watchdog = True
            kill_group(p)
            raw, _ = p.communicate()
        except BaseException:  # Ctrl-C: ctest runs in its own session, so it did not get the SIGINT
            kill_group(p)
            p.wait()
            raise
        seconds = time.monotonic() - t0
        out = raw.decode(errors="replace")
        failed = parse_failed(out)
        if watchdog:
            failed.append(("(ctest)", f"stopped after {seconds:.0f} s, --suite-timeout"))
        ok = p.returncode == 0 and not watchdog and not failed
        if not ok and not failed:
            failed.append(("(ctest)", f"exit status {p.returncode}"))
        return ok, failed, out, seconds


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def parse_failed(out: str) -> list[tuple[str, str]]:
    """The tests in ctest's "The following tests FAILED:" list, else those its
    progress lines report as not passed (a run stopped half way)."""
    failed: list[tuple[str, str]] = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("The following tests FAILED:") or line.startswith("The following tests did not run:"):
            for follow in lines[i + 1:]:
                m = re.match(r"^\s*\d+\s+-\s+(\S+)\s+\(([^)]*)\)", follow)
                if not m:
                    break
                if all(name != m.group(1) for name, _ in failed):
                    failed.append((m.group(1), m.group(2)))
    if failed:
        return failed
    for line in lines:
        m = re.search(r"Test\s+#\d+:\s+(\S+)\s+\.*\s*\*+\s*([A-Za-z][A-Za-z :]*?)\s+[\d.]+\s+sec", line)
        if m and all(name != m.group(1) for name, _ in failed):
            failed.append((m.group(1), m.group(2).strip()))
    return failed


def last_error(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for pattern in (r"\berror:", r"\berror\b", r"^FAILED:"):
        hits = [ln for ln in lines if re.search(pattern, ln)]
        if hits:
            return hits[-1][:400]
    return lines[-1][:400] if lines else "(no output)"


# ------------------------------------------------------------------ results

@dataclass
class Result:
    mutation: Mutation
    status: str
    detail: str = ""
    seconds: float = 0.0


def score(results: list[Result]) -> float | None:
    k = sum(r.status == KILLED for r in results)
    s = sum(r.status == SURVIVED for r in results)
    return 100.0 * k / (k + s) if k + s else None


def score_line(results: list[Result]) -> str:
    k = sum(r.status == KILLED for r in results)
    s = sum(r.status == SURVIVED for r in results)
    sc = score(results)
    return f"score: killed/(killed+survived) = {sc:.1f} % ({k}/{k + s})" if sc is not None else \
        "score: killed/(killed+survived) = n/a (no mutation was built and tested)"


def summary_text(results: list[Result]) -> str:
    out = ["", "== summary"]
    for st in STATUSES:
        out.append(f"  {st:<17} {sum(r.status == st for r in results):>4}")
    out.append(f"  {'total':<17} {len(results):>4}")
    out.append(score_line(results))
    for st, title in ((SURVIVED, "survivors"), (NO_APPLY, "do not apply"), (NO_COMPILE, "do not compile")):
        rows = [r for r in results if r.status == st]
        if rows:
            out.append(f"{title}:")
            for r in rows:
                extra = f" [{r.detail}]" if r.detail and st != SURVIVED else ""
                out.append(f"  {r.mutation.id} ({r.mutation.file}): {r.mutation.why}{extra}")
    return "\n".join(out)


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(path: Path, results: list[Result], planned: int, info: dict, finished: bool) -> None:
    out = ["# Mutation campaign", ""]
    for k, v in info.items():
        out.append(f"- {k}: {v}")
    out.append(f"- mutations run: {len(results)} of {planned}" + ("" if finished else " (not finished)"))
    out += ["", "## Summary", "", "| status | count |", "|---|---:|"]
    for st in STATUSES:
        out.append(f"| {st} | {sum(r.status == st for r in results)} |")
    out += ["", score_line(results), ""]
    survivors = [r for r in results if r.status == SURVIVED]
    if survivors:
        out += ["## Survivors", ""]
        for r in survivors:
            out.append(f"- `{r.mutation.id}` ({r.mutation.file}): {r.mutation.why}")
        out.append("")
    out += ["## Every mutation", "", "| # | id | file | status | detail | s |", "|---:|---|---|---|---|---:|"]
    for i, r in enumerate(results, 1):
        out.append(f"| {i} | `{r.mutation.id}` | {r.mutation.file} | {r.status} | {md_escape(r.detail)} | "
                   f"{r.seconds:.0f} |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def line_for(k: int, n: int, r: Result) -> str:
    detail = f"  ({r.detail})" if r.detail else ""
    return f"[{k:>{len(str(n))}}/{n}] {r.status:<17} {r.mutation.id}{detail}  {r.seconds:.0f} s"


# --------------------------------------------------------------------- main

def main(argv: list[str]) -> int:
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quietly, into `| head`
    here = Path(__file__).resolve().parent
    try:
        root = Path(run_git(here, "rev-parse", "--show-toplevel").strip()).resolve()
    except (subprocess.CalledProcessError, FileNotFoundError):
        root = here.parents[1]
    ap = argparse.ArgumentParser(description="Mutation campaign of the unit tests (test/mutation/README.md).")
    ap.add_argument("--list", type=Path, default=here / "mutations.txt", help="the mutation list (default: %(default)s)")
    ap.add_argument("--only", help="comma-separated ids: only these")
    ap.add_argument("--quick", type=int, metavar="N", help="N mutations drawn at random (see --seed)")
    ap.add_argument("--seed", type=int, help="seed of --quick's draw (default: from the clock, printed)")
    ap.add_argument("--scratch", type=Path, default=root / "build/mutation/src",
                    help="the copy of the working tree (default: %(default)s); the build folder is its sibling 'build'")
    ap.add_argument("--build-dir", type=Path, help="the build folder (default: next to --scratch, named 'build')")
    ap.add_argument("--timeout", type=int, default=120,
                    help="ctest --timeout, seconds (tests with their own TIMEOUT property keep it; default: %(default)s)")
    ap.add_argument("--suite-timeout", type=float,
                    help="seconds after which a whole ctest run is stopped and counted as a kill "
                         "(default: 3 x the baseline's ctest time + 2 x --timeout)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs (default: %(default)s)")
    ap.add_argument("--test-jobs", type=int, default=2, help="ctest -j (default: %(default)s)")
    ap.add_argument("--nice", type=int, default=0, help="run builds and tests at this nice value (default: 0)")
    ap.add_argument("--report", type=Path, help="also write the report here, as Markdown (updated after each mutation)")
    ap.add_argument("--min-score", type=float, metavar="P", help="exit 1 if the score is below P percent")
    ap.add_argument("--dry-run", action="store_true",
                    help="only copy the tree and check that each mutation applies (no cmake, no build)")
    a = ap.parse_args(argv)

    scratch = (a.scratch if a.scratch.is_absolute() else Path.cwd() / a.scratch).resolve()
    build = (a.build_dir if a.build_dir else scratch.parent / "build")
    build = (build if build.is_absolute() else Path.cwd() / build).resolve()
    list_path = a.list if a.list.is_absolute() else (Path.cwd() / a.list)
    for what, p in (("scratch", scratch), ("build", build)):
        if within(root, p) or within(p, root / ".git"):
            ap.error(f"the {what} folder {p} must not hold the repository or be inside .git")
    if within(build, scratch) or within(scratch, build):
        ap.error("the scratch and build folders must not be inside one another")
    if a.quick is not None and a.quick < 1:
        ap.error("--quick needs N >= 1")
    if a.seed is not None and a.quick is None:
        ap.error("--seed goes with --quick")

    try:
        mutations = parse_list(list_path)
    except (ListError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.only:
        wanted = [s.strip() for s in a.only.split(",") if s.strip()]
        known = {m.id for m in mutations}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            print(f"error: no mutation with id {', '.join(unknown)} in {list_path}", file=sys.stderr)
            return 2
        mutations = [m for m in mutations if m.id in set(wanted)]
    seed = None
    if a.quick is not None:
        seed = a.seed if a.seed is not None else int(time.time()) % 1_000_000
        mutations = random.Random(seed).sample(mutations, min(a.quick, len(mutations)))
        print(f"--quick {a.quick} --seed {seed}", flush=True)

    names = source_files(root, [scratch, build])
    written, unchanged, removed = sync_tree(root, scratch, names)
    print(f"scratch copy {scratch}: {len(names)} files ({written} written, {unchanged} unchanged, {removed} removed)",
          flush=True)

    n = len(mutations)
    if a.dry_run:
        bad = 0
        for k, m in enumerate(mutations, 1):
            path = scratch / m.file
            count = path.read_bytes().count(m.find.encode()) if path.is_file() else None
            if count == 1:
                print(f"[{k:>{len(str(n))}}/{n}] {'apply':<17} {m.id}")
            else:
                bad += 1
                why = "file not found" if count is None else f"found {count} times"
                print(f"[{k:>{len(str(n))}}/{n}] {NO_APPLY:<17} {m.id}  ({m.file}: {why})")
        print(f"\n{n - bad} of {n} apply exactly once" + (f"; {bad} do not apply" if bad else ""))
        return 1 if bad else 0

    runner = Runner(root, scratch, build, a.jobs, a.test_jobs, a.timeout, a.nice)
    runner.configure()
    print(f"building the unmutated unit tests in {build}", flush=True)
    t0 = time.monotonic()
    ok, out = runner.build_targets()
    if not ok:
        sys.stdout.write(out[-6000:])
        print(f"error: the unmutated tree does not build ({last_error(out)}): fix it before a mutation run",
              file=sys.stderr)
        return 2
    print(f"built in {time.monotonic() - t0:.0f} s; running the unit tests once", flush=True)
    passed, failed, out, base_seconds = runner.run_tests()
    if not passed:
        sys.stdout.write(out[-8000:])
        print("error: the unit tests fail without any mutation (" + ", ".join(f"{t} ({w})" for t, w in failed) +
              "): fix them before a mutation run", file=sys.stderr)
        return 2
    runner.suite_timeout = a.suite_timeout if a.suite_timeout else 3 * base_seconds + 2 * a.timeout
    print(f"baseline: the unit tests pass in {base_seconds:.0f} s (a run is stopped after "
          f"{runner.suite_timeout:.0f} s)\n", flush=True)

    try:
        head = run_git(root, "rev-parse", "--short", "HEAD").strip()
        dirty = bool(run_git(root, "status", "--porcelain", "--untracked-files=no").strip())
    except subprocess.CalledProcessError:
        head, dirty = "unknown", False
    info = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "commit": head + (" with uncommitted changes" if dirty else ""),
        "list": str(list_path),
        "selection": ("--quick " + str(a.quick) + " --seed " + str(seed)) if a.quick is not None
        else ("--only " + a.only if a.only else "all"),
        "baseline unit tests": f"{base_seconds:.0f} s",
    }

    results: list[Result] = []
    started = time.monotonic()
    try:
        for k, m in enumerate(mutations, 1):
            t1 = time.monotonic()
            path = scratch / m.file
            if not path.is_file():
                r = Result(m, NO_APPLY, f"{m.file}: file not found")
            else:
                original = path.read_bytes()
                find, replace = m.find.encode(), m.replace.encode()
                count = original.count(find)
                if count != 1:
                    r = Result(m, NO_APPLY, f"found {count} times")
                else:
                    try:
                        path.write_bytes(original.replace(find, replace, 1))
                        built, out = runner.build_targets()
                        if not built:
                            r = Result(m, NO_COMPILE, last_error(out).replace(str(scratch) + "/", ""))
                        else:
                            passed, failed, out, _ = runner.run_tests()
                            if passed:
                                r = Result(m, SURVIVED)
                            else:
                                r = Result(m, KILLED, ", ".join(t if w == "Failed" else f"{t}: {w}" for t, w in failed))
                    finally:
                        path.write_bytes(original)  # a newer time: Ninja rebuilds it for the next one
            r.seconds = time.monotonic() - t1
            results.append(r)
            print(line_for(k, n, r), flush=True)
            if a.report:
                write_report(a.report, results, n, info, finished=False)
    except KeyboardInterrupt:
        print("\ninterrupted (the mutated file was put back)", flush=True)
        print(summary_text(results))
        if a.report:
            write_report(a.report, results, n, info, finished=False)
        return 130

    info["duration"] = f"{time.monotonic() - started:.0f} s"
    print(summary_text(results))
    if a.report:
        write_report(a.report, results, n, info, finished=True)
        print(f"report: {a.report}")
    code = 0
    if any(r.status in (NO_APPLY, NO_COMPILE) for r in results):
        code = 1
    if a.min_score is not None:
        sc = score(results)
        if sc is None or sc < a.min_score:
            print(f"the score is below --min-score {a.min_score:g} %")
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
