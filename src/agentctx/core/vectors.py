"""Which embedding model the stored vectors belong to, and the switch to another model.

The vector table (``records_vec``, or ``records_vec_blob`` without sqlite-vec) holds the vectors of
one model at a time: the one ``embedding_model`` names (one row: model name and dimension). Two
models' vectors are never compared because they are never stored together: a model change
(:func:`settle`, through :func:`switch`) drops every stored vector, re-creates ``records_vec`` at the
new model's dimension and flags every record ``pending_embedding``, in one transaction. The re-embed
that follows is the ordinary embedding of pending records (:func:`agentctx.embeddings.vecstore.embed_pending`),
batch by batch, each batch committed with its vectors: a killed worker resumes where it stopped,
and no record is touched but its flag. Meanwhile a record not yet re-embedded is found by keywords
only, as a new record is. Every write of vectors and every vector search checks the model first
(:func:`guard`), so a process still holding the old model neither stores nor searches vectors of it.

Vectors stored before the model was recorded (schema 0005 and older) have model NULL. They were
made by the model configured then: the one the config file named, else that release's default
(:data:`UNRECORDED_DEFAULT`). That model adopts them (:func:`settle` with its ``owner``); any other
switches, so a changed default never takes another model's vectors for its own. Until they are
settled, vector searches and writes refuse them (:func:`guard`). A new store (no vector yet) is
adopted by the first model. Hooks never read any of this.
"""

from __future__ import annotations

from agentctx.core import schema
from agentctx.core.errors import AgentctxError
from agentctx.core.plan import execute, one

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.plan import Plan

BLOB_TABLE = "records_vec_blob"
#: The default embedding model of the releases that did not record the vectors' model.
UNRECORDED_DEFAULT = "BAAI/bge-small-en-v1.5"


class ModelMismatchError(AgentctxError, ValueError):
    """Raised by :func:`guard` (vector writes and searches) when the stored vectors belong to
    another model than the caller's: they must not be compared, nor mixed."""


class VectorTableError(AgentctxError):
    """Raised by :func:`switch` when ``records_vec`` exists but sqlite-vec does not load, so the
    old model's vectors in it cannot be dropped."""


class Space:
    """The stored vectors' model (None: not recorded) and dimension, and the re-embed in progress
    (``reembed_total`` records flagged at ``switched_at``; 0 when none runs)."""

    __slots__ = ("dims", "model", "reembed_total", "switched_at")

    def __init__(
        self, model: str | None, dims: int, reembed_total: int = 0, switched_at: str | None = None
    ) -> None:
        self.model = model
        self.dims = dims
        self.reembed_total = reembed_total
        self.switched_at = switched_at

    def to_dict(self) -> dict[str, object]:
        """Plain data (``doctor --json``, ``model reembed --json``)."""
        return {
            "model": self.model,
            "dims": self.dims,
            "reembed_total": self.reembed_total,
            "switched_at": self.switched_at,
        }


def space() -> Plan[Space | None]:
    """The recorded model of the stored vectors; None on a store of an older schema."""
    try:
        row = yield one(
            "SELECT model, dims, reembed_total, switched_at FROM embedding_model WHERE id = 1"
        )
    except Exception as exc:  # no such table: a store not migrated yet (doctor reads those)
        if "no such table" in str(exc):
            return None
        raise
    if row is None:
        return None
    model = None if row[0] is None else str(row[0])
    return Space(model, int(row[1]), int(row[2]), None if row[3] is None else str(row[3]))


def counts() -> Plan[tuple[int, int]]:
    """(records with a vector, records pending embedding) over the whole store."""
    row = yield one(
        "SELECT count(*) FILTER (WHERE pending_embedding = 0), "
        "count(*) FILTER (WHERE pending_embedding = 1) FROM records"
    )
    return int(row[0] or 0), int(row[1] or 0)


def guard(model: str, dims: int) -> Plan[None]:
    """Raise :class:`ModelMismatchError` unless the stored vectors are ``model``'s at ``dims``."""
    current = yield from space()
    if current is None or current.model is None:
        if current is not None and current.dims == dims and (yield from counts())[0] == 0:
            return  # no vector stored yet: the first model adopts the space (settle)
        raise ModelMismatchError(
            f"the stored vectors have no recorded model; {model} must settle them first "
            "(`agentctx model reembed`)"
        )
    if current.model != model or current.dims != dims:
        raise ModelMismatchError(
            f"the stored vectors belong to {current.model} ({current.dims} dimensions), not "
            f"{model} ({dims}); a re-embed is pending: `agentctx model reembed`"
        )


def settle(
    model: str, dims: int, *, vec: bool, now: str, owner: str | None = None
) -> Plan[tuple[str, Space | None]]:
    """Make ``model`` the stored vectors' model (run inside a write transaction).

    ``owner``: the model that made unrecorded vectors (None: ``model``, for a caller that has
    checked :func:`guard`); unrecorded vectors of another owner are switched away, not adopted.
    Returns what was done (``same``, ``adopted`` or ``switched``) and the space before.
    """
    current = yield from space()
    if current is None:
        raise AgentctxError("the store predates embedding_model: open it with agentctx to migrate")
    if current.model == model and current.dims == dims:
        return "same", current
    if current.model is None and current.dims == dims:
        mine = owner is None or owner == model or (yield from counts())[0] == 0
        if mine:
            yield execute("UPDATE embedding_model SET model = ? WHERE id = 1", (model,))
            return "adopted", current
    yield from switch(model, dims, vec=vec, now=now)
    return "switched", current


def switch(model: str, dims: int, *, vec: bool, now: str) -> Plan[int]:
    """Drop every stored vector, size the vector table for ``dims`` and flag every record for
    embedding with ``model``; return how many records the re-embed has to embed."""
    if vec:
        yield execute("DROP TABLE IF EXISTS records_vec")
        yield execute(schema.vec_objects(dims).strip().rstrip(";"))
    else:
        found = yield one("SELECT 1 FROM sqlite_master WHERE name = 'records_vec'")
        if found is not None:
            raise VectorTableError(
                "sqlite-vec does not load, so the old vectors in records_vec cannot be dropped: "
                "fix sqlite-vec (`agentctx doctor`) before the model changes"
            )
    yield execute(f"DROP TABLE IF EXISTS {BLOB_TABLE}")
    yield execute("UPDATE records SET pending_embedding = 1 WHERE pending_embedding = 0")
    _embedded, pending = yield from counts()
    yield execute(
        "UPDATE embedding_model SET model = ?, dims = ?, reembed_total = ?, switched_at = ? "
        "WHERE id = 1",
        (model, dims, pending, now),
    )
    return pending


def finish() -> Plan[bool]:
    """End the re-embed in progress once no record is pending; True when it ended now."""
    changed = yield execute(
        "UPDATE embedding_model SET reembed_total = 0 WHERE id = 1 AND reembed_total > 0 "
        "AND NOT EXISTS (SELECT 1 FROM records WHERE pending_embedding = 1)"
    )
    return bool(changed)
