import os

import pytest

from bayespass.data.suites import Suite, Task
from bayespass.execution.child import encode
from bayespass.execution.groundtruth import ground_truth
from bayespass.execution.sandbox import Sandbox, SandboxError, probe_layer


def toy_suite(tmp_cache=None) -> Suite:
    tasks = {
        "toy/add1": Task("toy/add1", "def add1(x):\n", "add1", "    return x + 1\n", inputs=[[1], [2], [41]], n_base=2),
        "toy/halve": Task("toy/halve", "def halve(x):\n", "halve", "    return x / 2\n",
                          inputs=[[1.0], [3.0], [1e-9], [7.0]], n_base=2, atol=1e-6),
    }
    suite = Suite("toy", tasks, "toyhash")
    ground_truth(suite, use_cache=False, workers=1)
    return suite


def _runs_here(layer: str) -> bool:
    """Whether a trivial program runs in ``layer`` on this machine."""
    try:
        sb = Sandbox(layer=layer)
    except (SandboxError, OSError):
        return False
    try:
        return sb.run("def f(x):\n    return x\n", "f", [encode((1,))], [10.0])[0].status == "value"
    except (SandboxError, OSError):
        return False
    finally:
        sb.close()


# every layer this machine offers (as root: seccomp+uid and, where user namespaces work, seccomp+userns)
LAYERS = [probe_layer()] + [layer for layer in ("seccomp+uid", "seccomp+userns", "bwrap")
                            if layer != probe_layer() and (layer != "seccomp+uid" or os.getuid() == 0)
                            and _runs_here(layer)]


@pytest.fixture(scope="session")
def suite():
    return toy_suite()


@pytest.fixture(params=LAYERS)
def layer(request):
    return request.param
