"""Where users train: checks and handlers that go into a training run itself.

- :mod:`probewise.integrations.torch`: :func:`~probewise.integrations.torch.check_forward`,
  the mask probe on the forward a loop really runs (any loop);
- :mod:`probewise.integrations.transformers`:
  :class:`~probewise.integrations.transformers.PreflightCallback`, the same check on a
  ``Trainer``'s (or TRL trainer's) first training batch;
- :mod:`probewise.integrations.profiler`:
  :func:`~probewise.integrations.profiler.kernel_table_handler`, a ``torch.profiler``
  ``on_trace_ready`` that writes the kernel table beside each trace.

Each module imports torch and transformers only when used; they need the ``[torch]``
extra.
"""

from __future__ import annotations

__all__: list[str] = []
