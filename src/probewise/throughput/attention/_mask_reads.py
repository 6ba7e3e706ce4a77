"""Each distinct mask of a recorded run, read once (many layers share one): its band,
its kind, its bytes, whether packed documents attend each other through it, and the
``flex_attention`` blocks it becomes (no torch here)."""

from __future__ import annotations

from typing import final

import attrs

from probewise.throughput.attention._band import Band, BandKind, analyse_band, crosses_documents
from probewise.throughput.attention._paths import FlexBlocks, flex_blocks
from probewise.throughput.attention._records import RawCall, RecordedRun
from probewise.throughput.attention._scenario import MaskScenario, Packing
from probewise.throughput.attention._sdpa_types import MaskKind

__all__ = ["MaskRead", "MaskReader"]


@final
@attrs.frozen(kw_only=True)
class MaskRead:
    """What one SDPA call's mask is: its band, kind, bytes and whether it lets packed
    documents attend each other (``None`` without packing)."""

    band: Band
    kind: MaskKind
    mask_bytes: int
    cross_document: bool | None


class MaskReader:
    """Reads each distinct mask of a recorded run once (many layers share one)."""

    def __init__(self, run: RecordedRun, scenario: MaskScenario) -> None:
        self.run = run
        self.scenario = scenario
        self.packed = scenario.packing is not Packing.NONE
        self.bands: dict[tuple[int, int | None], Band] = {}
        self.flex: dict[int, FlexBlocks] = {}
        self.crossing: dict[int, bool] = {}

    def blocks(self, mask_id: int | None) -> FlexBlocks | None:
        """The flex ``BlockMask`` counts of a mask, once per distinct mask."""
        if mask_id is None:
            return None
        if mask_id not in self.flex:
            self.flex[mask_id] = flex_blocks(self.run.masks[mask_id])
        return self.flex[mask_id]

    def read(self, raw: RawCall) -> MaskRead:
        """The mask ``raw`` passed to SDPA (or its absence), read."""
        run, scenario, packed = self.run, self.scenario, self.packed
        if raw.mask_id is None:
            cross = (len(scenario.documents) > 1) if packed else None
            return MaskRead(
                band=Band(kind=BandKind.NONE),
                kind=MaskKind.NONE,
                mask_bytes=0,
                cross_document=cross,
            )
        mask_id = raw.mask_id
        key = (mask_id, raw.chunk_size)
        if key not in self.bands:
            band = analyse_band(
                run.masks[mask_id], chunk_size=raw.chunk_size, documents=scenario.documents
            )
            if mask_id in run.heads_differ:
                band = Band(
                    kind=BandKind.OTHER,
                    padding_columns=band.padding_columns,
                    masked_rows=band.masked_rows,
                    allowed_share=band.allowed_share,
                )
            self.bands[key] = band
            if packed and mask_id not in self.crossing:
                self.crossing[mask_id] = crosses_documents(run.masks[mask_id], scenario.documents)
        return MaskRead(
            band=self.bands[key],
            kind=MaskKind.BOOLEAN if raw.mask_dtype_bool else MaskKind.ADDITIVE,
            mask_bytes=run.mask_bytes[mask_id],
            cross_document=self.crossing[mask_id] if packed else None,
        )
