"""Sandboxed execution of generated programs (``bayespass.execute(...)`` runs :func:`.engine.execute`).

The subpackage shares its name with the public function ``bayespass.execute``;
once a submodule is imported Python binds the *package* to that attribute, so
the package itself is made callable and forwards to :func:`.engine.execute`.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from .engine import execute

        return execute(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
