"""Keys of tuning problems: the same problem gets the same key in every run, so a stored result
is found again."""

from autoloader.store import dataset_key


def test_an_object_address_does_not_change_the_key():
    # A default repr carries the address ("<function collate_as_list at 0x7f...>"), which differs
    # between processes; the key must not.
    other_address = {"collate_fn": "<function collate_as_list at 0x7f00deadbeef>"}
    assert dataset_key("mod:ds", 10, (8,), None, "cpu", other_address) == \
        dataset_key("mod:ds", 10, (8,), None, "cpu", {"collate_fn": "<function collate_as_list at 0x1234>"})


def test_different_arguments_give_different_keys():
    assert dataset_key("mod:ds", 10, (8,), None, "cpu", {"drop_last": True}) != \
        dataset_key("mod:ds", 10, (8,), None, "cpu", {"drop_last": False})


def test_a_result_file_gets_the_usual_permissions(tmp_path):
    import os
    import stat

    from autoloader.store import atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(str(tmp_path / "result.json"), "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "result.json").st_mode) == 0o644
    assert os.listdir(tmp_path) == ["result.json"]  # no temporary file left behind
