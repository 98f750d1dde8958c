"""``onemodel scan``: many models read, checked, hashed or converted, one row each
(docs/scan.md).

    >>> import onemodel
    >>> result = onemodel.scan("s3://bucket/models/", "catalog.jsonl", check=True)
    >>> result.summary["validity"]                 # {'valid': 480, 'unreadable': 20}

:func:`scan` runs it (:mod:`.run`); :mod:`.sources` expands the SOURCEs, :mod:`.row` makes one
model's row (:func:`scan_one`, :func:`failed_row`), :mod:`.catalog` writes and reads the JSON
lines and Parquet outputs, :mod:`.summary` and :mod:`.duplicates` report on the rows, and
:mod:`.executors` runs the tasks (local processes or Dask).
"""

from .catalog import read_catalog
from .duplicates import find_duplicates
from .row import FIELDS, SCHEMA_VERSION, ScanOptions, failed_row, scan_one
from .run import ScanResult, scan
from .sources import expand
from .summary import summarize_rows

__all__ = ["scan", "ScanResult", "ScanOptions", "scan_one", "failed_row", "expand",
           "read_catalog", "summarize_rows", "find_duplicates", "FIELDS", "SCHEMA_VERSION"]
