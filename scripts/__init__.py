"""The repository's tools, importable from its root: ``python -m scripts.bench ...`` (the GPU
benchmark and the tools that read its records) and ``python -m scripts.faults`` (the fault suite,
whose datasets ``scripts.faults.datasets`` the tests use too). Not part of the autoloader package."""
