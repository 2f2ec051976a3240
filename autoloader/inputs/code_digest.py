"""What a trial ran: a digest of the user's code, so that a failure it caused does not outlive it.

# NOTE [ Failures keyed by code ]
# A trial that failed because the user's code raised (the dataset, collate_fn, sampler or step:
# ``retry.USER_CODE_CAUSES``) says nothing about the config once that code is fixed. So each
# stored trial records the digest of the code it ran, and a stored failure of the user's code
# stands only while the digest is the same (store/study.py). The digest is computed in the trial
# process, where the dataset and step are built (NOTE [ No CUDA in the driver ]), from
# - the code of the dataset's class (and its bases), the step (and the factory that made it) and
#   the callables among the fixed DataLoader arguments (collate_fn, worker_init_fn, a sampler's
#   class): bytecode, names and constants, which do not change when only comments do;
# - the contents of every module file loaded from outside the standard library and the installed
#   packages (the user's own modules, whichever the dataset or step imported), and their paths.
# Installed packages are left out: upgrading torch is not a fix of the user's code, and would
# otherwise re-run every failure. Autoloader's own files are left out for the same reason.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import site
import sys
import sysconfig
import types
from typing import Any, Iterable

_AUTOLOADER_DIR = os.path.dirname(os.path.abspath(__file__))


def code_fingerprint(dataset: Any, step: Any = None, fixed_kwargs: dict | None = None) -> str:
    """A short hex digest of the code the dataset, the step and the fixed DataLoader arguments run
    (NOTE [ Failures keyed by code ]): equal across processes while that code is unchanged."""
    digest = hashlib.sha256()
    for obj in [type(dataset), step, *(fixed_kwargs or {}).values()]:
        _digest_code(digest, obj)
    for path in user_module_files():
        digest.update(path.encode() + b"\0")
        try:
            with open(path, "rb") as fh:
                digest.update(hashlib.sha256(fh.read()).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:16]


# NOTE [ A step keyed by what it is ]
# The key holds the step's identity, not its spelling, so ``--step data.py:make_step`` and
# ``best_loader(..., step=make_step)`` are one problem: the module and qualified name of the
# object given (the factory, when a factory is given; read where it is loaded: the trial process
# for a spec, the caller's process for an object), and a digest of its code (bytecode, names and
# constants, its nested functions included: a changed step is another problem, a comment is
# not). A spec of a file is imported under the file's own name (source.py); a script's own
# objects (``__main__``'s, ``__mp_main__``'s in a spawned process) are named by the script's
# file too, so ``python train.py`` and ``train.py:make_step`` agree.


def module_name(module: str | None) -> str:
    """A module's name as keys give it: a script's (``__main__``, ``__mp_main__``) by its file's
    stem, as ``MODULE:ATTR`` specs of that file import it."""
    if module in ("__main__", "__mp_main__"):
        path = getattr(sys.modules.get(module), "__file__", None)
        if path:
            return os.path.splitext(os.path.basename(path))[0]
        return "__main__"
    return module or "?"


def callable_identity(obj: Any) -> str:
    """``module.qualname#digest`` of a step (or its factory): NOTE [ A step keyed by what it is ]."""
    if isinstance(obj, functools.partial):
        args = re.sub(r" at 0x[0-9a-fA-F]+", "", repr((obj.args, sorted(obj.keywords.items()))))
        return f"partial({callable_identity(obj.func)}, {args})"
    kind = obj if inspect.isclass(obj) or isinstance(obj, (types.FunctionType, types.MethodType)) else type(obj)
    func = getattr(kind, "__func__", kind)
    name = f"{module_name(getattr(func, '__module__', None))}.{getattr(func, '__qualname__', type(obj).__name__)}"
    return f"{name}#{_digest_code(hashlib.sha256(), obj).hexdigest()[:12]}"


def _digest_code(digest, obj: Any):
    for code in _codes_of(obj):
        digest.update(_code_bytes(code))
    return digest


def user_module_files(modules: Iterable[types.ModuleType] | None = None) -> list[str]:
    """The files of loaded modules that are the user's (not the standard library's, an installed
    package's nor autoloader's own), sorted."""
    installed = _installed_roots()
    files = set()
    for module in list(sys.modules.values()) if modules is None else modules:
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        path = os.path.abspath(path)
        if path.startswith(_AUTOLOADER_DIR + os.sep) or any(path.startswith(root) for root in installed):
            continue
        files.add(path)
    return sorted(files)


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site module has neither
        pass
    return tuple(os.path.abspath(r) + os.sep for r in roots if r)


def _codes_of(obj: Any) -> list[types.CodeType]:
    """The code objects behind a class (with its bases outside the installed packages), a
    function, a bound method or a callable instance."""
    if obj is None:
        return []
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        func = getattr(obj, "__func__", obj)
        return [func.__code__]
    cls = obj if inspect.isclass(obj) else type(obj)
    if cls.__module__ == "builtins":
        return []
    codes = []
    installed = _installed_roots()
    for klass in cls.__mro__:
        source = getattr(sys.modules.get(klass.__module__), "__file__", None) or ""
        if klass is object or any(os.path.abspath(source).startswith(root) for root in installed):
            continue
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)  # staticmethod, classmethod
            if isinstance(func, types.FunctionType):
                codes.append(func.__code__)
    return codes


def _code_bytes(code: types.CodeType) -> bytes:
    """The parts of a code object that say what it does, as stable bytes: marshal's output is
    not (it depends on reference counts), and neither is a frozenset's repr (string hashing)."""
    parts = [code.co_name.encode(), code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            parts.append(_code_bytes(const))
        elif isinstance(const, frozenset):
            parts.append(repr(sorted(map(repr, const))).encode())
        else:
            parts.append(repr(const).encode())
    return b"\0".join(parts)
