"""vqcheck's bridge loader.

`vqcheck watch` puts this directory first on PYTHONPATH, so every Python
process of the job imports this module at start-up (Python's `site` imports
`sitecustomize`), before the user's script runs and without any change to
it. Here it only:

1. loads the bridge, vqcheck._bridge, when VQC_WATCH_DIR is set (that is,
   under `vqcheck watch`), which hooks torch when the job imports it;
2. runs the sitecustomize this one shadows (the user's or the
   distribution's, if any), so nothing the job relied on is lost.

A Python without the vqcheck package says so on stderr and runs the job
unchecked; `vqcheck watch` then finds nothing from that process and exits 3.
"""
import os
import sys


def _load_vqcheck_bridge():
    if not os.environ.get("VQC_WATCH_DIR"):
        return
    try:
        import vqcheck._bridge as bridge
    except Exception as e:  # the job must run even if the bridge cannot
        sys.stderr.write(
            f"vqcheck watch: the bridge did not load in {sys.executable} "
            f"({type(e).__name__}: {e}); install the vqcheck package into "
            "the Python that runs the job (pip install . in the vqcheck "
            "checkout)\n")
        return
    bridge.install()


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == here:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            import importlib.util
            spec = importlib.util.spec_from_file_location(
                "_vqcheck_shadowed_sitecustomize", candidate)
            if spec is None or spec.loader is None:
                return
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as e:
                sys.stderr.write(f"vqcheck watch: {candidate} failed: "
                                 f"{type(e).__name__}: {e}\n")
            return


_load_vqcheck_bridge()
_run_shadowed_sitecustomize()
