"""Where the dataset and the step come from, and how they reach a trial process.

# NOTE [ Getting the dataset into a trial process ]
# Trial processes are started with 'spawn' (NOTE [ Trial processes ]), so the dataset and step
# are rebuilt there: a ``MODULE:ATTR`` spec is re-imported in the child (any dataset, picklable or
# not); an object handed to ``tune()`` is pickled, and one that cannot be is a usage error whose
# fix is a spec or a module-level class.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pickle
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import usage


@dataclass(frozen=True)
class Source:
    """A recipe for an object: a ``MODULE:ATTR`` spec to re-import, or pickled bytes."""

    name: str
    spec: str | None = None
    payload: bytes | None = None

    @classmethod
    def from_spec(cls, spec: str) -> "Source":
        _split_spec(spec)
        return cls(name=spec, spec=spec)

    @classmethod
    def from_object(cls, obj: Any, what: str) -> "Source":
        try:
            payload = pickle.dumps(obj)
        except Exception as exc:  # noqa: BLE001 - pickle raises many kinds
            raise usage(f"the {what} must be picklable to reach the trial process (they are started "
                        "with 'spawn' so a crash cannot take your process with it)",
                        f"{type(obj).__name__}: {exc}",
                        f"define the {what} at module level (no lambdas or local classes)"
                        + (f", or use the CLI with --{what} MODULE:ATTR so it is re-imported instead"
                           if what in ("dataset", "step") else "")) from None
        return cls(name=_object_name(obj), payload=payload)

    def load(self) -> Any:
        if self.spec is not None:
            return load_spec(self.spec)
        return pickle.loads(self.payload)


def _object_name(obj: Any) -> str:
    kind = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__class__.__name__)}"


def _split_spec(spec: str) -> tuple[str, str]:
    module, sep, attr = spec.rpartition(":")
    if not sep or not module or not attr:
        raise usage("a dataset or step is named MODULE:ATTR", spec,
                    "write e.g. --dataset mypkg.data:train_set or --dataset path/to/file.py:make_dataset")
    return module, attr


def load_spec(spec: str) -> Any:
    """Import ``MODULE:ATTR``; MODULE is a dotted name importable from the current directory, or
    a path to a ``.py`` file. ATTR may be dotted."""
    module_name, attr = _split_spec(spec)
    try:
        module = _import_module(module_name)
    except FileNotFoundError:
        raise usage("the module of --dataset/--step must exist", module_name,
                    "give a path to an existing .py file or an importable module name") from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises on import
        raise usage(f"importing {module_name!r} must succeed", f"{type(exc).__name__}: {exc}",
                    "fix the error above, or run from the directory that holds the module") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise usage(f"module {module_name!r} must define {attr!r}", spec,
                        f"check the name after ':' (it has: {', '.join(n for n in dir(module) if not n.startswith('_'))[:300]})") from None
    return obj


def _import_module(name: str):
    if name.endswith(".py") or os.sep in name:
        path = os.path.abspath(name)
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
        by_stem = _import_by_stem(path)
        if by_stem is not None:
            return by_stem
        mod_name = "_autoloader_user_" + "".join(c if c.isalnum() else "_" for c in path)
        if mod_name in sys.modules:
            return sys.modules[mod_name]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module  # registered first so pickling its classes works
        sys.path.insert(0, os.path.dirname(path))
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)


def _import_by_stem(path: str):
    """Import ``path`` as the module its file name says, with its folder put on ``sys.path``: a
    spawned worker unpickles the dataset by its class's module name, so that name must be
    importable there. None when the name is not an identifier or belongs to another module
    (``random.py``); the caller then falls back to a private name that fork still serves."""
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if not stem.isidentifier():
        return None
    loaded = sys.modules.get(stem)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        return loaded if origin and os.path.abspath(origin) == path else None
    try:
        found = importlib.util.find_spec(stem)
    except (ImportError, ValueError):
        return None
    if found is not None and not (found.origin and os.path.abspath(found.origin) == path):
        return None
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(stem)


def is_factory(obj: Any) -> bool:
    """Whether ``resolve_dataset`` calls ``obj`` (a zero-argument callable that is no dataset itself)."""
    from torch.utils.data import Dataset, IterableDataset

    return not isinstance(obj, (Dataset, IterableDataset)) and callable(obj) and _takes_no_args(obj)


def resolve_dataset(obj: Any, name: str):
    """A Dataset instance as given, or the result of calling a zero-argument factory (a class is
    one when its ``__init__`` takes no arguments)."""
    from torch.utils.data import Dataset, IterableDataset

    origin = f"{name} ->"
    if not isinstance(obj, (Dataset, IterableDataset)) and callable(obj):
        if not _takes_no_args(obj):
            # A class has __getitem__ and __len__ as attributes, so it would pass for an instance
            # below; a callable instance that is sized and indexable is a dataset.
            if inspect.isclass(obj) or not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
                built = "a class is built only when its __init__" if inspect.isclass(obj) else \
                    "a callable is called only when it"
                raise usage("--dataset must name a Dataset instance or a zero-argument callable returning one; "
                            f"{built} takes no arguments", f"{name} -> {_needs(obj)}",
                            "pass an instance (e.g. train_set = MyDataset('/data') at module level, then "
                            "--dataset module:train_set) or a function that takes no arguments and returns one")
        else:
            obj = obj()
            origin = f"{name}() returned"
            if obj is None:
                raise usage("a --dataset factory must return the dataset it builds", f"{origin} None",
                            "end the function with `return dataset` (without a return it gives None)")
    if isinstance(obj, IterableDataset):
        return obj
    if isinstance(obj, (str, bytes, bytearray)):   # indexable and sized, but its samples would be characters
        raise usage("--dataset must name a torch Dataset or a zero-argument callable returning one, not text",
                    f"{origin} {type(obj).__name__} {obj[:60]!r}",
                    "point it at the Dataset (or the function that builds it), not at a path or name string")
    if inspect.isclass(obj) or not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
        raise usage("--dataset must name a torch Dataset (with __getitem__ and __len__) or a "
                    "zero-argument callable returning one", f"{origin} {type(obj).__name__}",
                    "point it at a Dataset instance or a function that builds one")
    if len(obj) == 0:
        raise usage("the dataset must hold at least one sample", f"{name} has length 0",
                    "check the data path or filters that built it")
    return obj


def resolve_step(obj: Any, name: str) -> Callable[[Any], Any]:
    """A ``step(batch)`` callable, or the step a zero-argument factory returns."""
    if not callable(obj):
        raise usage("--step must name a callable step(batch) or a zero-argument factory of one",
                    f"{name} -> {type(obj).__name__}", "point it at a function")
    if inspect.isclass(obj) and not _takes_no_args(obj):
        # Called as step(batch), the class would build an object of every batch and measure nothing.
        raise usage("--step must name a step(batch) function, or a zero-argument factory of one; a class "
                    "is built only when its __init__ takes no arguments", f"{name} -> {_needs(obj)}",
                    "pass an instance with a __call__(batch), or a function that takes no arguments and "
                    "returns the step")
    if _takes_no_args(obj):
        obj = obj()
        if not callable(obj):
            raise usage("a zero-argument --step factory must return a callable step(batch)",
                        f"{name}() -> {type(obj).__name__}", "return the training-step function")
    return obj


def _needs(fn: Callable) -> str:
    """What a callable that needs arguments is, and the arguments it needs: "class X(root, n)"."""
    try:
        needed = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        needed = ["..."]
    kind = "class" if inspect.isclass(fn) else "callable"
    return f"{kind} {getattr(fn, '__qualname__', type(fn).__name__)}({', '.join(needed)})"


def _takes_no_args(fn: Callable) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in signature.parameters.values())
