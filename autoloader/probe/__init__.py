"""Probing one config: the burst measurement (``burst``), the trial process (``runner``) and the
guard that watches its memory (``guard``)."""
