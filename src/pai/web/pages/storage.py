"""The storages a visitor may use, and a simple file browser for each: list a folder, go into
it, download a file, upload files, make a folder, delete. Every action is the API's (the same
checks, the same audit records); uploads stream from the browser's form into the storage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated
from urllib.parse import quote

from fastapi import Form, Request, Response, UploadFile
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from pai.errors import InvalidParametersError
from pai.server.deps import Context
from pai.server.routes import storages as storages_api
from pai.storage.paths import StoragePath, storage_path
from pai.web.notices import redirect, redirect_after
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormVisitor
from pai.web.templating import render

router = portal_router()

UPLOAD_PIECE = 1024 * 1024


@router.get("/storages", name="portal.storages")
def storages(request: Request, context: Context, visitor: CurrentVisitor) -> HTMLResponse:
    found = storages_api.list_storages(context, visitor.principal).storages
    return render(request, "storages.html", nav="storage", storages=found)


@router.get("/storages/{name}", name="portal.storage")
def browse(
    request: Request, context: Context, visitor: CurrentVisitor, name: str, path: str = ""
) -> HTMLResponse:
    detail = storages_api.get_storage(name, context, visitor.principal)
    listing = storages_api.list_files(name, context, visitor.principal, path)
    where = storage_path(path)
    return render(
        request,
        "storage.html",
        nav="storage",
        storage=detail,
        listing=listing,
        crumbs=_crumbs(name, where),
        folder=str(where) if listing.type == "directory" else str(where.parent),
    )


@router.get("/storages/{name}/download", name="portal.storage_download")
def download(context: Context, visitor: CurrentVisitor, name: str, path: str) -> Response:
    return storages_api.download(name, context, visitor.principal, path)


@router.post("/storages/{name}/upload", name="portal.storage_upload")
async def upload(
    context: Context,
    visitor: FormVisitor,
    name: str,
    files: Annotated[list[UploadFile], Form()],
    folder: Annotated[str, Form()] = "",
) -> Response:
    """Files chosen in the form, each stored in `folder` under its own name."""
    back = _folder_url(name, folder)
    transfers = storages_api.transfers_of(context)
    stored = []
    for file in files:
        if not file.filename:
            continue
        target = storage_path(folder).child(_file_name(file.filename))
        try:
            await run_in_threadpool(
                transfers.upload,
                visitor.principal,
                name,
                target,
                _pieces(file),
                declared_size=file.size,
            )
        except InvalidParametersError as refused:
            return redirect(back, refused.message, kind="error")
        stored.append(target.name)
    if not stored:
        return redirect(back, "Choose at least one file to upload.", kind="error")
    return redirect(back, f"Uploaded {', '.join(stored)}.")


@router.post("/storages/{name}/folder", name="portal.storage_folder")
def make_folder(
    context: Context,
    visitor: FormVisitor,
    name: str,
    folder: Annotated[str, Form()] = "",
    new_folder: Annotated[str, Form()] = "",
) -> Response:
    def make() -> str:
        target = storage_path(folder).child(_file_name(new_folder))
        storages_api.make_folder(name, context, visitor.principal, str(target))
        return f"Folder {target} is made."

    return redirect_after(_folder_url(name, folder), make)


@router.post("/storages/{name}/delete", name="portal.storage_delete")
def delete(
    context: Context,
    visitor: FormVisitor,
    name: str,
    path: Annotated[str, Form()] = "",
) -> Response:
    where = storage_path(path)

    def remove() -> str:
        removed = storages_api.remove(name, context, visitor.principal, path, recursive=True)
        count = removed.removedFiles
        return f"Deleted {where} ({count} file{'s' if count != 1 else ''})."

    return redirect_after(_folder_url(name, str(where.parent)), remove)


def _crumbs(name: str, path: StoragePath) -> list[tuple[str, str]]:
    """(label, path) of each folder from the root (labelled with the storage's name) to
    `path`."""
    crumbs = [(name, "")]
    for depth, part in enumerate(path.parts, start=1):
        crumbs.append((part, "/".join(path.parts[:depth])))
    return crumbs


def _folder_url(name: str, folder: str) -> str:
    return f"/storages/{quote(name)}?path={quote(folder)}"


def _file_name(raw: str) -> str:
    """A name typed or sent by the browser, as one path segment."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name or name in (".", ".."):
        raise InvalidParametersError(f"{raw!r} is not a usable file or folder name")
    return name


def _pieces(file: UploadFile) -> Iterator[bytes]:
    while piece := file.file.read(UPLOAD_PIECE):
        yield piece
