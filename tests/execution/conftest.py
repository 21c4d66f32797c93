import os

import pytest

from bayespass.data.suites import Suite, Task
from bayespass.execution.groundtruth import ground_truth
from bayespass.execution.sandbox import probe_layer


def toy_suite(tmp_cache=None) -> Suite:
    tasks = {
        "toy/add1": Task("toy/add1", "def add1(x):\n", "add1", "    return x + 1\n", inputs=[[1], [2], [41]], n_base=2),
        "toy/halve": Task("toy/halve", "def halve(x):\n", "halve", "    return x / 2\n",
                          inputs=[[1.0], [3.0], [1e-9], [7.0]], n_base=2, atol=1e-6),
    }
    suite = Suite("toy", tasks, "toyhash")
    ground_truth(suite, use_cache=False, workers=1)
    return suite


LAYERS = [probe_layer()] + (["seccomp+uid"] if os.getuid() == 0 and probe_layer() != "seccomp+uid" else [])


@pytest.fixture(scope="session")
def suite():
    return toy_suite()


@pytest.fixture(params=LAYERS)
def layer(request):
    return request.param
