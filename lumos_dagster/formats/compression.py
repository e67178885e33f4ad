"""Compressed files known by their first bytes rather than their name: gzip and zstd headers,
the name a gzip header may carry, and what the first decompressed bytes look like."""

from __future__ import annotations

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: suffixes Arrow's streams undo by themselves (`compression="detect"` goes by the name)
SUFFIXES = (".gz", ".bz2", ".zst", ".lz4")
_FNAME = 0x08  # gzip header flag: the original file name follows
_FEXTRA = 0x04
_INFLATED = 4096  # decompressed bytes enough to tell JSON from delimited text


def codec_of(head: bytes) -> str | None:
    """Arrow's codec name for a compressed head, else None."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def gzip_name(head: bytes) -> str | None:
    """The original file name a gzip header records (`gzip orders.csv` keeps `orders.csv`)."""
    if len(head) < 10 or not head[3] & _FNAME:
        return None
    pos = 10
    if head[3] & _FEXTRA:
        if len(head) < 12:
            return None
        pos += 2 + int.from_bytes(head[10:12], "little")
    end = head.find(b"\0", pos)
    return head[pos:end].decode("latin-1") if end > pos else None


def inflate(head: bytes, codec: str) -> bytes:
    """As much of the decompressed start as `head` holds (a truncated frame ends the read)."""
    import pyarrow as pa  # only for a compressed file without a telling name: rare, and heavy to import

    stream = pa.input_stream(pa.BufferReader(head), compression=codec)
    out = b""
    while len(out) < _INFLATED:
        try:
            chunk = stream.read(256)
        except (OSError, pa.ArrowException):  # the head ends inside a block
            break
        if not chunk:
            break
        out += chunk
    return out


def text_format(data: bytes) -> str | None:
    """json (a document or JSON lines), tsv or csv from decompressed text; None for anything else."""
    text = data.decode("utf-8", errors="replace").lstrip()
    if text[:1] in ("{", "["):
        return "json"
    first = text.split("\n", 1)[0].rstrip("\r")
    if not first.replace("\t", " ").isprintable() or "\ufffd" in first:  # binary, not text
        return None
    if "\t" in first:
        return "tsv"
    return "csv" if "," in first else None
