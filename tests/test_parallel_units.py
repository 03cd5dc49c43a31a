"""The work units of the parallel test run (tests/conftest.py, `make test`): a module is one unit, the
modules sharing the session's configs/test.yaml run are one, and the names conftest.py schedules
first are modules that exist (a stale name would silently stop ordering anything)."""
import conftest
from helpers import REPO


def test_modules_sharing_the_run_are_one_unit():
    shared = {conftest.unit_of_work(f"tests/{m}::test_x[a::b]") for m in conftest.SHARED_RUN}
    assert shared == {"test_config_run"}
    assert conftest.unit_of_work("tests/test_mirror.py::test_both_verdicts_decided[0]") == "tests/test_mirror.py"
    assert conftest.unit_of_work("tests/test_io.py::TestX::test_y") == "tests/test_io.py"


def test_scheduled_names_are_modules_that_use_what_they_claim():
    for name in conftest.LONGEST_FIRST:
        assert (REPO / "tests" / name).is_file(), name
    for name in conftest.SHARED_RUN:  # each module of the shared unit reads the shared run
        assert "test_config_run" in (REPO / "tests" / name).read_text(), name
