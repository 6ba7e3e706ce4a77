# Only what probewise uses (src/probewise/cli/kernels.py): distributed ships
# py.typed but leaves these untyped, which mypy --strict and pyright strict refuse.
from concurrent.futures import Executor

class Client:
    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float | None = None,
        set_as_default: bool = True,
    ) -> None: ...
    def get_executor(self, *, pure: bool = True) -> Executor: ...
    def close(self) -> None: ...
