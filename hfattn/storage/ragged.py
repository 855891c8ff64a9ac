r"""Rows of token ids of different lengths, stored flat on disk and memory-mapped: the format
of prepared data (fairseq's indexed datasets, Megatron's ``.bin`` / ``.idx``).

A ragged array named ``name`` in a folder is three files:

- ``name.bin``: every row's values, one after the other (``uint8`` for UTF-8 text,
  ``uint16`` for a vocabulary of at most 65,536 ids, else ``uint32``);
- ``name.idx.npy``: the ``int64`` offsets :math:`o_0 = 0 \le o_1 \le \dots \le o_n`, row
  :math:`i` being ``values[o_i : o_{i+1}]``;
- ``name.json``: the dtype, the number of rows and of values.

:class:`RaggedIds` reads one: its ``values`` are a read-only ``numpy.memmap``, so opening a
corpus of any size costs nothing but the index. :meth:`RaggedIds.padded` gathers the rows of a
batch into a padded array with one ``preadv`` a row from the file, not through the map: a read
through the map faults in the pages around each row as well (the kernel's fault-around, 16
pages on Linux), so a random batch order would map an ever larger share of a large corpus
into the process; a read copies only the row's bytes and maps nothing.
:class:`RaggedWriter` writes one in batches (memory bounded by a batch), and
:class:`RaggedTexts` keeps strings the same way (UTF-8 bytes per row).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

BIN_SUFFIX, INDEX_SUFFIX, META_SUFFIX = ".bin", ".idx.npy", ".json"


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id below ``vocab_size``."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class RaggedIds(Sequence):
    """Rows of ids as flat ``values`` and ``offsets`` (see the module docstring); ``ragged[i]``
    is row ``i`` as a numpy array (a view of the map)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray, path: Path | None = None):
        self.values = values
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.lengths = np.diff(self.offsets)
        """Length of every row (``int64``)."""
        self.path = path
        """The ``.bin`` file that ``values`` maps, read row by row by :meth:`gather`
        (``None``: values in memory)."""
        self._file = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_file"] = None  # an open file does not cross processes: each opens its own
        return state

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[int]], dtype=np.int64) -> RaggedIds:
        """A ragged array in memory holding ``rows`` (small data, tests)."""
        rows = [np.asarray(r, dtype=dtype) for r in rows]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        values = np.concatenate(rows) if rows else np.zeros(0, dtype=dtype)
        return cls(values.astype(dtype, copy=False), offsets)

    @classmethod
    def open(cls, folder: str | Path, name: str) -> RaggedIds:
        """Map the ragged array ``name`` of ``folder`` (read only)."""
        folder = Path(folder)
        meta = json.loads((folder / f"{name}{META_SUFFIX}").read_text())
        offsets = np.load(folder / f"{name}{INDEX_SUFFIX}")
        dtype = np.dtype(meta["dtype"])
        path = folder / f"{name}{BIN_SUFFIX}"
        if not meta["values"]:
            return cls(np.zeros(0, dtype=dtype), offsets)
        return cls(np.memmap(path, dtype=dtype, mode="r"), offsets, path)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("RaggedIds: slices take every row (step 1)")
            return RaggedIds(self.values, self.offsets[start : stop + 1], self.path)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"row {i} of {len(self)}")
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    @property
    def num_values(self) -> int:
        """Values of all rows (the tokens of a split)."""
        return int(self.offsets[-1] - self.offsets[0])

    def take(self, rows) -> RaggedIds:
        """The rows ``rows`` (indices) as a new ragged array in memory."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return RaggedIds(self.gather(rows), offsets)

    def gather(self, rows) -> np.ndarray:
        """The values of ``rows`` (indices), row after row, in a new array: read from
        :attr:`path` with one ``os.preadv`` a row into the array (the map is not touched), or
        indexed from ``values`` in memory.

        Raises:
            OSError: the file holds fewer bytes than its index says (it was cut short).
        """
        rows = np.asarray(rows, dtype=np.int64)
        if self.path is None:
            return self.values[self.positions(rows)]
        lengths = self.lengths[rows]
        out = np.empty(int(lengths.sum()), dtype=self.values.dtype)
        if self._file is None:
            self._file = open(self.path, "rb", buffering=0)  # noqa: SIM115 (closed with self)
        fd, itemsize, buffer, at = self._file.fileno(), out.itemsize, memoryview(out).cast("B"), 0
        for start, length in zip(self.offsets[rows].tolist(), lengths.tolist(), strict=True):
            size = length * itemsize
            if os.preadv(fd, [buffer[at : at + size]], start * itemsize) != size:
                raise OSError(f"{self.path}: row at value {start} is cut short")
            at += size
        return out

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """The positions in ``values`` of every value of ``rows``, row after row."""
        lengths = self.lengths[rows]
        starts = self.offsets[:-1][rows]
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return np.repeat(starts, lengths) + within

    def padded(
        self, rows, width: int | None = None, fill: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``rows`` right-padded with ``fill`` to ``[len(rows), width]`` (``int64``;
        ``width`` defaults to the longest row's) and the mask of their values (1 = value, 0 =
        padding): one :meth:`gather`.

        Raises:
            ValueError: a row is longer than ``width``.
        """
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        longest = int(lengths.max()) if len(rows) else 0
        width = longest if width is None else width
        if longest > width:
            raise ValueError(f"a row of {longest} values does not fit a width of {width}")
        keep = np.arange(width)[None, :] < lengths[:, None]
        out = np.full((len(rows), width), fill, dtype=np.int64)
        out[keep] = self.gather(rows)
        return out, keep.astype(np.int64)

    def tolist(self) -> list[list[int]]:
        """Every row as a list of ints (small data only)."""
        return [self[i].tolist() for i in range(len(self))]


class RaggedWriter:
    """Writes a ragged array ``name`` into ``folder`` batch by batch (:meth:`add`), holding only
    the row lengths in memory; :meth:`close` writes the index and returns the mapped array."""

    def __init__(self, folder: str | Path, name: str, dtype):
        self.folder, self.name, self.dtype = Path(folder), name, np.dtype(dtype)
        self._file = open(self.folder / f"{name}{BIN_SUFFIX}", "wb")  # noqa: SIM115
        self._lengths: list[np.ndarray] = []

    def add(self, rows: Iterable[Sequence[int]]) -> None:
        """Append ``rows`` (sequences of ids)."""
        rows = list(rows)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter((v for r in rows for v in r), dtype=self.dtype, count=int(lengths.sum()))
        self.add_flat(flat, lengths)

    def add_flat(self, values: np.ndarray, lengths: np.ndarray) -> None:
        """Append rows given flat: ``values`` of all of them and each one's length."""
        lengths = np.array(lengths, dtype=np.int64)  # a copy: extend_row changes it
        if int(lengths.sum()) != len(values):
            raise ValueError(f"{len(values)} values but the lengths add up to {lengths.sum()}")
        self._file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self._lengths.append(lengths)

    def extend_row(self, values: np.ndarray) -> None:
        """Append ``values`` to the last row added: a row written in pieces (a long document
        encoded a chunk at a time).

        Raises:
            ValueError: no row was added yet.
        """
        if not any(len(lengths) for lengths in self._lengths):
            raise ValueError("extend_row: no row to extend; add one first")
        self._file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        last = next(lengths for lengths in reversed(self._lengths) if len(lengths))
        last[-1] += len(values)

    def close(self) -> RaggedIds:
        """Close the values, write the index and the metadata; the array, mapped (the folder
        that publishes it flushes it to the disk: :func:`~hfattn.storage.file_io.atomic_dir`)."""
        self._file.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        np.save(self.folder / f"{self.name}{INDEX_SUFFIX}", offsets)
        meta = {"dtype": self.dtype.name, "rows": len(lengths), "values": int(offsets[-1])}
        (self.folder / f"{self.name}{META_SUFFIX}").write_text(json.dumps(meta) + "\n")
        return RaggedIds.open(self.folder, self.name)

    def __enter__(self) -> RaggedWriter:
        return self

    def __exit__(self, *exc) -> None:
        if not self._file.closed:
            self._file.close()


class RaggedTexts(Sequence):
    """Strings kept as a ragged array of their UTF-8 bytes: ``texts[i]`` decodes row ``i``;
    nothing but the index is held in memory."""

    def __init__(self, data: RaggedIds):
        self.data = data

    @classmethod
    def open(cls, folder: str | Path, name: str) -> RaggedTexts:
        """Map the texts ``name`` of ``folder``."""
        return cls(RaggedIds.open(folder, name))

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> RaggedTexts:
        """Texts in memory (small data, tests)."""
        return cls(RaggedIds.from_rows((np.frombuffer(t.encode(), np.uint8) for t in texts),
                                       dtype=np.uint8))  # fmt: skip

    @staticmethod
    def write(writer: RaggedWriter, texts: Sequence[str]) -> None:
        """Append ``texts`` to ``writer`` (a ``uint8`` :class:`RaggedWriter`)."""
        encoded = [t.encode("utf-8") for t in texts]
        writer.add_flat(np.frombuffer(b"".join(encoded), dtype=np.uint8), [len(b) for b in encoded])

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self.data[i].tobytes().decode("utf-8")


__all__ = ["RaggedIds", "RaggedTexts", "RaggedWriter", "ids_dtype"]
