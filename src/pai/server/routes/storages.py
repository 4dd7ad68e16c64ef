"""`/api/v2/storages`: the storages a user may use (OpenPAI's list and detail), their
definitions (administrators), and their files: list, download, upload (whole or resumable),
make folders and remove.

Paths inside a storage travel in the `path` query parameter, relative to its root; `..` is
refused (`pai.storage.paths`). Bodies of uploads stream straight into the storage, so a large
file never sits in the server's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import anyio.from_thread
from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from pai.auth.permissions import Principal
from pai.errors import InvalidParametersError, ServiceUnavailableError
from pai.server.deps import Admin, Caller, Context
from pai.server.errors import describe_validation_errors, error_responses
from pai.server.schemas import Message
from pai.server.storageschemas import (
    CreateStorageRequest,
    FileEntry,
    FileListing,
    FilesRemoved,
    FileWritten,
    StartUploadRequest,
    StorageDetail,
    StorageList,
    StorageQuota,
    StorageRequest,
    StorageSummary,
    UploadInfo,
)
from pai.storage import catalog
from pai.storage.access import (
    Credentials,
    default_storage_names,
    open_backend,
    usable_storage,
    visible_storages,
)
from pai.storage.backends.base import over_limit
from pai.storage.kinds import DIRECTORY, DirectoryLocation, S3Credentials, S3Location
from pai.storage.paths import StoragePath, storage_path
from pai.storage.transfers import CHUNK_SIZE, Transfers, Upload
from pai.store.sharing import StorageRow

router = APIRouter(prefix="/storages", tags=["storages"])

T = TypeVar("T")
PathQuery = Annotated[str, Query(description="A path from the storage's root.", max_length=4096)]
CREDENTIAL_FIELDS = ("accessKeyId", "secretAccessKey")
MASK = "******"
BODY_BUFFER = 1024 * 1024
"""Bytes of an upload gathered before each write to the storage."""
USER_ERRORS = error_responses(400, 401, 403, 404)
FILE_BODY = {
    "requestBody": {
        "required": True,
        "description": "The file's bytes.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


# -- storages (OpenPAI) -----------------------------------------------------------------------


@router.get("", response_model=StorageList, responses=error_responses(401))
def list_storages(
    context: Context,
    caller: Caller,
    default: Annotated[
        str | None, Query(description="Present: only the caller's default storages.")
    ] = None,
) -> StorageList:
    """The storages the caller may use (an administrator: all)."""
    with context.database.reading() as session:
        rows = visible_storages(session, caller, defaults_only=default is not None)
        defaults = set(default_storage_names(session))
    credentials = _credentials(context)
    return StorageList(
        storages=[
            _summary(row, row.name in defaults, _quota(row, caller, credentials)) for row in rows
        ]
    )


@router.get("/{name}", response_model=StorageDetail, responses=USER_ERRORS)
def get_storage(name: str, context: Context, caller: Caller) -> StorageDetail:
    """One storage, if the caller may use it (403 otherwise, 404 if there is none)."""
    with context.database.reading() as session:
        row = usable_storage(session, caller, name)
        default = row.name in default_storage_names(session)
    return _detail(row, default, _quota(row, caller, _credentials(context)))


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=error_responses(400, 401, 403, 409, 503),
)
def create_storage(body: CreateStorageRequest, context: Context, admin: Admin) -> Message:
    """Define a storage (administrators); grant it to groups with their `storageConfigs`."""
    definition = _definition(body)
    definition.check()
    with context.database.session() as session:
        catalog.create_storage(
            session, _credentials(context), admin.username, body.name, definition
        )
    return Message(message=f"storage '{body.name}' is created")


@router.put("/{name}", response_model=Message, responses=error_responses(400, 401, 403, 404, 503))
def update_storage(name: str, body: StorageRequest, context: Context, admin: Admin) -> Message:
    """Replace a storage's definition (administrators). Jobs submitted before keep mounting
    what they were submitted with."""
    credentials = _credentials(context)
    with context.database.reading() as session:
        current = catalog.existing(session, name)
    definition = catalog.with_kept_credentials(_definition(body), current, credentials)
    definition.check()
    with context.database.session() as session:
        catalog.update_storage(session, credentials, admin.username, name, definition)
    return Message(message=f"storage '{name}' is updated")


@router.delete("/{name}", response_model=Message, responses=error_responses(401, 403, 404))
def delete_storage(name: str, context: Context, admin: Admin) -> Message:
    """Forget a storage (administrators); its files stay where they are."""
    with context.database.session() as session:
        catalog.delete_storage(session, admin.username, name)
    return Message(message=f"storage '{name}' is deleted")


# -- files ------------------------------------------------------------------------------------


@router.get("/{name}/files", response_model=FileListing, responses=USER_ERRORS)
def list_files(name: str, context: Context, caller: Caller, path: PathQuery = "") -> FileListing:
    """What is at `path`: a folder's entries (folders first), or the file itself."""
    where = storage_path(path)
    backend = transfers_of(context).open(caller, name).backend
    entry = backend.stat(where)
    if entry.type != "directory":
        return FileListing(
            storage=name, path=str(where), type=entry.type, entries=[_file(where.parent, entry)]
        )
    entries = [_file(where, item) for item in backend.entries(where)]
    return FileListing(storage=name, path=str(where), type="directory", entries=entries)


@router.get(
    "/{name}/content",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}}},
        **USER_ERRORS,
    },
)
def download(name: str, context: Context, caller: Caller, path: PathQuery) -> Response:
    """The file's bytes, streamed."""
    where = storage_path(path)
    entry, chunks = transfers_of(context).download(caller, name, where)
    headers = {
        "Content-Length": str(entry.size),
        "Content-Disposition": _attachment(where.name),
    }
    return StreamingResponse(chunks, media_type="application/octet-stream", headers=headers)


@router.put(
    "/{name}/content",
    response_model=FileWritten,
    responses=error_responses(400, 401, 403, 404, 413, 507),
    openapi_extra=FILE_BODY,
)
async def upload(
    name: str, request: Request, context: Context, caller: Caller, path: PathQuery
) -> FileWritten:
    """Store the body as the file at `path` (replacing a file there; missing folders are
    made). The file appears whole once every byte is stored, or not at all."""
    where = storage_path(path)
    transfers = transfers_of(context)
    declared = _content_length(request)
    if declared is not None and declared > transfers.max_upload_bytes:
        raise over_limit(transfers.max_upload_bytes)
    size = await _with_body(
        request,
        lambda chunks: transfers.upload(caller, name, where, chunks, declared_size=declared),
    )
    return FileWritten(storage=name, path=str(where), size=size)


@router.post(
    "/{name}/folders",
    status_code=status.HTTP_201_CREATED,
    response_model=FileWritten,
    responses=USER_ERRORS,
)
def make_folder(name: str, context: Context, caller: Caller, path: PathQuery) -> FileWritten:
    where = storage_path(path)
    transfers_of(context).make_folder(caller, name, where)
    return FileWritten(storage=name, path=str(where), size=0)


@router.delete("/{name}/files", response_model=FilesRemoved, responses=USER_ERRORS)
def remove(
    name: str,
    context: Context,
    caller: Caller,
    path: PathQuery,
    recursive: Annotated[bool, Query(description="Remove a folder and all it holds.")] = False,
) -> FilesRemoved:
    where = storage_path(path)
    removed = transfers_of(context).remove(caller, name, where, recursive=recursive)
    return FilesRemoved(storage=name, path=str(where), removedFiles=removed)


# -- resumable uploads ------------------------------------------------------------------------


@router.get("/{name}/uploads", response_model=list[UploadInfo], responses=USER_ERRORS)
def list_uploads(name: str, context: Context, caller: Caller) -> list[UploadInfo]:
    """The caller's uploads in progress to this storage."""
    return [_upload_info(name, upload) for upload in transfers_of(context).uploads(caller, name)]


@router.post(
    "/{name}/uploads",
    status_code=status.HTTP_201_CREATED,
    response_model=UploadInfo,
    responses=error_responses(400, 401, 403, 404, 413, 507),
)
def start_upload(
    name: str, body: StartUploadRequest, response: Response, context: Context, caller: Caller
) -> UploadInfo:
    """Start a resumable upload (201), or find the caller's upload in progress of the same
    path, size and fingerprint (200) to resume it from its `offset`."""
    where = storage_path(body.path, what="body.path")
    upload, created = transfers_of(context).start_upload(
        caller, name, where, body.size, body.fingerprint
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return _upload_info(name, upload)


@router.get("/{name}/uploads/{upload_id}", response_model=UploadInfo, responses=USER_ERRORS)
def get_upload(name: str, upload_id: str, context: Context, caller: Caller) -> UploadInfo:
    return _upload_info(name, transfers_of(context).upload_status(caller, name, upload_id))


@router.put(
    "/{name}/uploads/{upload_id}",
    response_model=UploadInfo,
    responses=error_responses(400, 401, 403, 404, 409, 413, 507),
    openapi_extra=FILE_BODY,
)
async def send_piece(
    name: str,
    upload_id: str,
    request: Request,
    context: Context,
    caller: Caller,
    offset: Annotated[int, Query(ge=0, description="Where the body goes in the file.")],
) -> UploadInfo:
    """Add the body at `offset` (which must be the upload's offset). The answer's `offset`
    is what the storage durably holds; the piece that completes the file puts it in place."""
    transfers = transfers_of(context)
    upload = await _with_body(
        request, lambda chunks: transfers.append(caller, name, upload_id, offset, chunks)
    )
    return _upload_info(name, upload)


@router.delete("/{name}/uploads/{upload_id}", response_model=Message, responses=USER_ERRORS)
def abort_upload(name: str, upload_id: str, context: Context, caller: Caller) -> Message:
    transfers_of(context).abort(caller, name, upload_id)
    return Message(message=f"upload '{upload_id}' is aborted")


# -- helpers ----------------------------------------------------------------------------------


def _credentials(context: Context) -> Credentials:
    return Credentials(context.control_plane.secret_box)


def transfers_of(context: Context) -> Transfers:
    settings = context.settings
    return Transfers(
        context.database, _credentials(context), settings.max_upload_bytes, settings.disk_floor
    )


def _definition(body: StorageRequest) -> catalog.Definition:
    """The definition a request asks for, its `data` checked for the storage's type."""
    data = dict(body.data)
    try:
        if body.type == DIRECTORY:
            location: DirectoryLocation | S3Location = DirectoryLocation.model_validate(data)
            keys = None
        else:
            given = {key: data.pop(key) for key in CREDENTIAL_FIELDS if key in data}
            location = S3Location.model_validate(data)
            keys = S3Credentials.model_validate(given) if given else None
    except ValidationError as invalid:
        message = describe_validation_errors(invalid.errors())
        raise InvalidParametersError(f"data.{message}") from None
    return catalog.Definition(
        kind=body.type,
        location=location,
        credentials=keys,
        description=body.description,
        share=body.share,
        read_only=body.readOnly,
    )


def _summary(row: StorageRow, default: bool, quota: StorageQuota | None) -> StorageSummary:
    return StorageSummary(
        name=row.name,
        share=row.share,
        volumeName=row.name,
        default=default,
        type=row.kind,
        readOnly=row.read_only,
        description=row.description,
        quota=quota,
    )


def _detail(row: StorageRow, default: bool, quota: StorageQuota | None) -> StorageDetail:
    data: dict[str, Any] = dict(row.location)
    if row.sealed_credentials is not None:
        data.update(dict.fromkeys(CREDENTIAL_FIELDS, MASK))
    return StorageDetail(
        **_summary(row, default, quota).model_dump(),
        data=data,
        createdBy=row.created_by,
        createdAt=row.created_at,
        updatedBy=row.updated_by,
        updatedAt=row.updated_at,
    )


def _quota(row: StorageRow, caller: Principal, credentials: Credentials) -> StorageQuota | None:
    """The storage's space as its kind reports it (None when it cannot be read now)."""
    try:
        quota = open_backend(row, caller.username, credentials).quota()
    except (ServiceUnavailableError, InvalidParametersError):
        return None
    return (
        None
        if quota is None
        else StorageQuota(usedBytes=quota.used_bytes, limitBytes=quota.limit_bytes)
    )


def _file(folder: StoragePath, entry: Any) -> FileEntry:
    return FileEntry(
        name=entry.name,
        path=str(folder.child(entry.name)),
        type=entry.type,
        size=entry.size,
        modified=entry.modified,
    )


def _upload_info(name: str, upload: Upload) -> UploadInfo:
    row = upload.row
    return UploadInfo(
        id=row.id,
        storage=name,
        path="/" + row.path,
        size=row.size,
        offset=upload.offset,
        chunkSize=CHUNK_SIZE,
        complete=upload.complete,
        createdAt=row.created_at,
    )


def _content_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidParametersError(f"header Content-Length: not a number: {raw!r}") from None


def _attachment(name: str) -> str:
    """A Content-Disposition naming the file, safely quoted (RFC 6266 with RFC 5987)."""
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"


async def _with_body(request: Request, work: Callable[[Iterator[bytes]], T]) -> T:
    """Run `work` on a worker thread, reading the request's body as it arrives (in pieces of
    BODY_BUFFER), so that blocking storage I/O never holds up the event loop and the body is
    never held whole."""
    stream = request.stream().__aiter__()

    async def next_chunk() -> bytes | None:
        return await anext(stream, None)

    def chunks() -> Iterator[bytes]:
        buffer = bytearray()
        while True:
            chunk = anyio.from_thread.run(next_chunk)
            if chunk is None:
                break
            buffer += chunk
            if len(buffer) >= BODY_BUFFER:
                yield bytes(buffer)
                buffer.clear()
        if buffer:
            yield bytes(buffer)

    return await run_in_threadpool(work, chunks())
