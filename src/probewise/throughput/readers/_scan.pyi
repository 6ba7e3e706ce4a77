# The compiled trace scanner (_scan.c); see _native.py for what its results mean.
from collections.abc import Callable

_Counts = list[tuple[str | None, int, int]]
_Rows = list[tuple[int, bytes, int, int]]
_Lane = list[tuple[int, int]]
Scanned = tuple[
    int, _Counts, bytes | None, _Rows, _Lane, int, bytes, bytes, bytes, bytes, bytes, bytes
]

def scan(
    buf: bytes | bytearray | memoryview,
    start: int,
    end: int,
    role: Callable[[str | None], int],
    /,
) -> Scanned | None: ...
def crc32(data: bytes | bytearray | memoryview, /) -> int: ...
