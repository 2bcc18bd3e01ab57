"""Where the tests find gpucc: the installed package, or (GPUCC_LIBRARY, GPUCC_COMMAND and
PYTHONPATH=python, as ctest sets them) a build tree's. The GPU tests skip, saying so, on a
machine without a CUDA device."""
import os

import pytest

import gpucc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


NO_GPU = gpucc.no_gpu()


def pytest_report_header(config):
    return "gpucc GPU tests: " + ("skipped (%s)" % NO_GPU if NO_GPU else "on the GPU")


@pytest.fixture
def root():
    return ROOT


@pytest.fixture
def gpu():
    if NO_GPU:
        pytest.skip("GPU test skipped: " + NO_GPU)


def pytest_sessionfinish(session, exitstatus):
    """With GPUCC_PYTEST_SKIP_STATUS set (ctest's skip code), a run whose every test was
    skipped for want of a GPU exits with it, so that ctest says skipped, not passed."""
    code = os.environ.get("GPUCC_PYTEST_SKIP_STATUS")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not code or not NO_GPU or exitstatus != 0 or reporter is None:
        return
    ran = sum(len(reporter.stats.get(k, [])) for k in ("passed", "failed", "error"))
    if ran == 0 and reporter.stats.get("skipped"):
        session.exitstatus = int(code)
