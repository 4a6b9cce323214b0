#!/usr/bin/env bash
# kprof's CUDA check on a machine with an NVIDIA GPU, from a plain checkout, in under 9 minutes.
#
#   OUT=/some/dir scripts/gpu_check.sh
#
# Needs python3 with CuPy, numpy and pytest (pluggy comes with pytest); no network. Where
# libcupti can be loaded (NVIDIA's nvidia-cuda-cupti wheel, or the system CUDA's), kprof's own
# CUPTI reader is checked too (CuPy's own kernels, CUPTI against events, cost per launch with
# CUPTI on and off), on the compiled reader and again with KPROF_PURE_PYTHON=1; backends.txt
# says which capture path and which reader were active, and why. kprof is
# imported from this source tree (PYTHONPATH); when its entry points are not installed and
# setuptools is present, it is installed editable (no dependencies, no index) so that
# `kprof backends` lists it; if that fails, the suite registers the cuda plugin itself.
#
# Writes to $OUT: environment.txt, backends.txt, pytest.log, junit.xml,
# cuda_figures.json (every figure the suite measured) and cuda_figures.md (the same, as tables).
# Exit status: pytest's.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out/gpu}
mkdir -p "$OUT"
PY=${PYTHON:-$(command -v python3 || command -v python)}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
export KPROF_GPU_FIGURES="$OUT/cuda_figures.json"
rm -f "$KPROF_GPU_FIGURES"
t_start=$(date +%s)

{
  date -u
  uname -srm
  "$PY" --version
  "$PY" -c "import cupy, numpy, pytest; print('cupy', cupy.__version__, '| numpy', numpy.__version__, '| pytest', pytest.__version__)"
  "$PY" -c "
from kprof_cuda import cupti_lib
try:
    c = cupti_lib.load()
    print('libcupti', c.api_version, c.how, c.path)
except Exception as exc:
    print('libcupti: not usable here (events path only):', exc)
import kprof_core.low_level.native as n
m = n.load_plugin_part('kprof_cuda', '_cupti')
print('CUPTI reader:', 'compiled (kprof_cuda._cupti)' if m else 'pure Python (' + n.describe() + ')')" 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

has_entry_point() {
  "$PY" -c "
import sys
from importlib.metadata import entry_points
sys.exit(0 if any(e.name == 'cuda' for e in entry_points(group='kprof.backends')) else 1)" 2>/dev/null
}
if ! has_entry_point && "$PY" -c "import setuptools" 2>/dev/null; then
  if timeout 120 "$PY" -m pip install --no-deps --no-build-isolation --no-index -e "$ROOT" \
      > "$OUT/pip_install.log" 2>&1 && has_entry_point; then
    echo "kprof installed editable (entry points available)"
  else
    echo "editable install not possible (see pip_install.log): the suite registers the plugin itself"
  fi
fi

# What `kprof backends` says (registering the plugin from source when not installed).
timeout 60 "$PY" - > "$OUT/backends.txt" 2>&1 <<'EOF'
import kprof
try:
    kprof.get_backend("cuda")
except kprof.KprofError:
    import kprof_cuda.plugin
    kprof.register_backend(kprof_cuda.plugin, "cuda")
from kprof_core.cli.main import main
main(["backends"])
EOF
cat "$OUT/backends.txt"

timeout 240 "$PY" -m pytest tests/gpu/test_cuda_gpu.py tests/gpu/test_cuda_gpu_sites.py -m gpu -v -rs -p no:cacheprovider \
  --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.log"
rc=${PIPESTATUS[0]}
# The pure-Python CUPTI reader on the same device (its figures in a file of their own).
KPROF_PURE_PYTHON=1 KPROF_GPU_FIGURES="$OUT/cuda_figures_pure.json" timeout 150 "$PY" -m pytest \
  tests/gpu/test_cuda_gpu.py tests/gpu/test_cuda_gpu_sites.py -m gpu -v -rs -p no:cacheprovider \
  -k "cupti or cost_per_launch or sites" \
  2>&1 | tee "$OUT/pytest_pure.log"
rc_pure=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && rc=$rc_pure

# Then every launch outcome through kprof's CUPTI reader (tests/gpu/test_cuda_gpu_outcomes.py:
# records per launch, a failed launch and a stream capture, drops then running kernels, a
# million empty kernels, threads with sites while another releases the GIL, torch.profiler
# beside kprof where PyTorch is installed); figures under "cupti_outcomes".
timeout 300 "$PY" -m pytest tests/gpu/test_cuda_gpu_outcomes.py -m gpu -v -rs -p no:cacheprovider \
  2>&1 | tee "$OUT/pytest_outcomes.log"
rc_outcomes=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && rc=$rc_outcomes

"$PY" - "$OUT" "$rc" "$(( $(date +%s) - t_start ))" <<'EOF'
import json, os, sys
import xml.etree.ElementTree as ET

out, rc, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3]
path = os.path.join(out, "cuda_figures.json")
figures = json.load(open(path)) if os.path.exists(path) else {}
try:
    suite = ET.parse(os.path.join(out, "junit.xml")).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    results = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    failed = [c.get("name") for c in suite.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
except Exception as exc:  # no junit file: pytest did not get that far
    results, failed = {"error": f"{type(exc).__name__}: {exc}"}, []
figures["run"] = {"pytest_exit_status": rc, "seconds": int(seconds), **results,
                  "failed": failed}
json.dump(figures, open(path, "w"), indent=2)

def cell(v):
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)

env = figures.get("environment", {})
lines = [f"# kprof CUDA check: {env.get('device', '?')}", "",
         f"{env.get('date', '')}; CuPy {env.get('cupy', '?')}, CUDA runtime "
         f"{env.get('cuda_runtime', '?')}, driver {env.get('cuda_driver', '?')}, "
         f"Python {env.get('python', '?')}.", ""]
for section, values in figures.items():
    lines += [f"## {section}", "", "| figure | value |", "| --- | --- |"]
    if isinstance(values, dict):
        lines += [f"| {k} | {cell(v)} |" for k, v in values.items()]
    else:
        lines.append(f"| value | {cell(values)} |")
    lines.append("")
open(os.path.join(out, "cuda_figures.md"), "w").write("\n".join(lines))
print("\n".join(lines))
EOF
exit "$rc"
