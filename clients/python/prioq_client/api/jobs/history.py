from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.history_view import HistoryView
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    queue: str,
    id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/queues/{queue}/jobs/{id}/history".format(
            queue=quote(str(queue), safe=""),
            id=quote(str(id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> HistoryView | Problem | None:
    if response.status_code == 200:
        response_200 = HistoryView.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[HistoryView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> Response[HistoryView | Problem]:
    """Read a job's history.

     Its enqueue, each claim with its worker and fence, each nack and lease
    expiry with its error and where it put the job, and its end, oldest
    first, while its queue keeps histories (the setting `history_ms`: how
    long after its last event a history is kept, whatever became of the
    job). A job that exists while its queue keeps none answers an empty
    list; a job neither known nor remembered answers 404.

    Args:
        queue (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[HistoryView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> HistoryView | Problem | None:
    """Read a job's history.

     Its enqueue, each claim with its worker and fence, each nack and lease
    expiry with its error and where it put the job, and its end, oldest
    first, while its queue keeps histories (the setting `history_ms`: how
    long after its last event a history is kept, whatever became of the
    job). A job that exists while its queue keeps none answers an empty
    list; a job neither known nor remembered answers 404.

    Args:
        queue (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        HistoryView | Problem
    """

    return sync_detailed(
        queue=queue,
        id=id,
        client=client,
    ).parsed


async def asyncio_detailed(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> Response[HistoryView | Problem]:
    """Read a job's history.

     Its enqueue, each claim with its worker and fence, each nack and lease
    expiry with its error and where it put the job, and its end, oldest
    first, while its queue keeps histories (the setting `history_ms`: how
    long after its last event a history is kept, whatever became of the
    job). A job that exists while its queue keeps none answers an empty
    list; a job neither known nor remembered answers 404.

    Args:
        queue (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[HistoryView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
) -> HistoryView | Problem | None:
    """Read a job's history.

     Its enqueue, each claim with its worker and fence, each nack and lease
    expiry with its error and where it put the job, and its end, oldest
    first, while its queue keeps histories (the setting `history_ms`: how
    long after its last event a history is kept, whatever became of the
    job). A job that exists while its queue keeps none answers an empty
    list; a job neither known nor remembered answers 404.

    Args:
        queue (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        HistoryView | Problem
    """

    return (
        await asyncio_detailed(
            queue=queue,
            id=id,
            client=client,
        )
    ).parsed
