"""The stored records' one reader and writer (search/codec.py): a field is one declaration, its
stored form and its checks follow from it, and a damaged value is named by its place. Unit
tests: toy records, no trial runs."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from autoloader.search.codec import MAX_CPUS, InvalidRecord, Stored, read, stored
from autoloader.search.space import LoaderConfig


@dataclass(frozen=True)
class Part(Stored):
    name: str
    share: float = stored(1.0, positive=True)


@dataclass(frozen=True)
class Whole(Stored):
    config: LoaderConfig
    cpus: int = stored(least=1, most=MAX_CPUS)
    rate: float | None = stored(None, key="samples_per_s", old=("pick_rate",), then=("doubled",))
    parts: tuple[Part, ...] = stored((), after="kind")
    kind: str = stored("ok", choices=("ok", "failed"))
    spans: tuple[tuple[str, float], ...] = ()
    note: str | None = stored(None, sparse=True)
    inner: Part | None = stored(None, flat=True)

    @property
    def doubled(self) -> float | None:
        return None if self.rate is None else 2 * self.rate

    def _read_back(self) -> Whole:
        if self.kind == "failed" and self.rate:
            raise ValueError(f"rate is {self.rate}, though the kind is failed")
        return self


CONFIG = LoaderConfig.make(16, 2, False)


def test_a_record_is_written_in_its_declared_order_with_what_it_derives_and_reads_back():
    whole = Whole(CONFIG, 4, 10.0, (Part("a", 0.5),), spans=(("load", 1.5),), inner=Part("b"))
    data = json.loads(json.dumps(whole.to_dict()))
    assert list(data) == ["config", "cpus", "samples_per_s", "doubled", "kind", "parts", "spans", "name", "share"]
    assert data["doubled"] == 20.0 and data["spans"] == [["load", 1.5]] and data["config"] == CONFIG.loader_kwargs()
    assert Whole.from_dict(data) == whole
    assert Whole.from_dict({**data, "note": "x"}).to_dict()["note"] == "x", "a sparse field is written when it holds"


def test_an_older_record_reads_its_old_names_and_the_defaults_of_what_it_lacks():
    older = {"config": CONFIG.loader_kwargs(), "cpus": 2, "pick_rate": 5.0, "parts": None}
    assert Whole.from_dict(older) == Whole(CONFIG, 2, 5.0)
    assert Whole.from_dict({**older, "unknown": 1}).inner is None, "a flat record none of whose fields is there"


@pytest.mark.parametrize("change, says", [
    ({"cpus": 0}, r"whole\.cpus is 0, not a count of 1 or more up to 65536"),
    ({"cpus": None}, r"whole\.cpus is None, not a count"),
    ({"samples_per_s": "fast"}, r"whole\.samples_per_s is 'fast', not a non-negative finite number"),
    ({"kind": "great"}, r"whole\.kind is 'great', not one of ok, failed"),
    ({"parts": [{"name": "a", "share": 0}]}, r"whole\.parts\[0\]\.share is 0, not a positive finite number"),
    ({"parts": [5]}, r"whole\.parts\[0\] is 5, not a mapping"),
    ({"spans": [["load"]]}, r"whole\.spans\[0\] is \['load'\], not a list of 2 items"),
    ({"config": {"batch_size": 16, "num_workers": 99, "pin_memory": False}},
     r"whole\.config\.num_workers is 99, more than the 8 a run"),
    ({"kind": "failed"}, r"whole\.rate is 3\.0, though the kind is failed"),
], ids=["least", "missing", "text", "choice", "nested", "item", "pair", "limit", "together"])
def test_a_damaged_field_is_named_by_its_place(change, says):
    good = {"config": CONFIG.loader_kwargs(), "cpus": 2, "samples_per_s": 3.0}
    with pytest.raises(InvalidRecord, match=says):
        Whole.from_dict({**good, **change}, "whole", limit=8)


def test_a_config_reads_alone_and_a_record_that_is_not_a_mapping_says_so():
    assert read(LoaderConfig, CONFIG.to_dict()) == CONFIG
    with pytest.raises(InvalidRecord, match=r"^the record is \[5\], not a mapping"):
        Whole.from_dict([5])
    with pytest.raises(TypeError, match="no rule colour"):
        stored(colour="red")
