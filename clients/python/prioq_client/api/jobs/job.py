from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.job_view import JobView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    queue: str,
    id: str,
    *,
    wait_ms: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["wait_ms"] = wait_ms

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/queues/{queue}/jobs/{id}".format(
            queue=quote(str(queue), safe=""),
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> JobView | Problem | None:
    if response.status_code == 200:
        response_200 = JobView.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[JobView | Problem]:
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
    wait_ms: int | Unset = UNSET,
) -> Response[JobView | Problem]:
    """Read a job in any state, or wait for it to end.

     With `wait_ms`, answers as soon as the job is `completed` or `dead` (at
    once if it already is), whichever instance acked or dead-lettered it;
    otherwise with its view when the wait is over. 404 if the job is
    unknown, or is gone by the time it ends (acked without retention).

    Args:
        queue (str):
        id (str):
        wait_ms (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        wait_ms=wait_ms,
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
    wait_ms: int | Unset = UNSET,
) -> JobView | Problem | None:
    """Read a job in any state, or wait for it to end.

     With `wait_ms`, answers as soon as the job is `completed` or `dead` (at
    once if it already is), whichever instance acked or dead-lettered it;
    otherwise with its view when the wait is over. 404 if the job is
    unknown, or is gone by the time it ends (acked without retention).

    Args:
        queue (str):
        id (str):
        wait_ms (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobView | Problem
    """

    return sync_detailed(
        queue=queue,
        id=id,
        client=client,
        wait_ms=wait_ms,
    ).parsed


async def asyncio_detailed(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
    wait_ms: int | Unset = UNSET,
) -> Response[JobView | Problem]:
    """Read a job in any state, or wait for it to end.

     With `wait_ms`, answers as soon as the job is `completed` or `dead` (at
    once if it already is), whichever instance acked or dead-lettered it;
    otherwise with its view when the wait is over. 404 if the job is
    unknown, or is gone by the time it ends (acked without retention).

    Args:
        queue (str):
        id (str):
        wait_ms (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        wait_ms=wait_ms,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
    wait_ms: int | Unset = UNSET,
) -> JobView | Problem | None:
    """Read a job in any state, or wait for it to end.

     With `wait_ms`, answers as soon as the job is `completed` or `dead` (at
    once if it already is), whichever instance acked or dead-lettered it;
    otherwise with its view when the wait is over. 404 if the job is
    unknown, or is gone by the time it ends (acked without retention).

    Args:
        queue (str):
        id (str):
        wait_ms (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobView | Problem
    """

    return (
        await asyncio_detailed(
            queue=queue,
            id=id,
            client=client,
            wait_ms=wait_ms,
        )
    ).parsed
