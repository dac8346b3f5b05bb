from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.job_view import JobView
from ...models.nack_request import NackRequest
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    queue: str,
    id: str,
    *,
    body: NackRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/queues/{queue}/jobs/{id}/nack".format(
            queue=quote(str(queue), safe=""),
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
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

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

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
    body: NackRequest,
) -> Response[JobView | Problem]:
    """Nack a job.

     `attempts` goes up by one; the job goes back to `pending` behind the jobs
    already waiting in its priority (or `scheduled` with `delay_ms`, or
    without it for the job's `backoff`), or to
    `dead` when `dead` is true or its attempts reach `max_attempts`.

    Args:
        queue (str):
        id (str):
        body (NackRequest): Give a job back without success. Example: {'dead': False, 'delay_ms':
            0, 'error': 'timeout talking to SMTP', 'lease_token': '…'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        body=body,
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
    body: NackRequest,
) -> JobView | Problem | None:
    """Nack a job.

     `attempts` goes up by one; the job goes back to `pending` behind the jobs
    already waiting in its priority (or `scheduled` with `delay_ms`, or
    without it for the job's `backoff`), or to
    `dead` when `dead` is true or its attempts reach `max_attempts`.

    Args:
        queue (str):
        id (str):
        body (NackRequest): Give a job back without success. Example: {'dead': False, 'delay_ms':
            0, 'error': 'timeout talking to SMTP', 'lease_token': '…'}.

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
        body=body,
    ).parsed


async def asyncio_detailed(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
    body: NackRequest,
) -> Response[JobView | Problem]:
    """Nack a job.

     `attempts` goes up by one; the job goes back to `pending` behind the jobs
    already waiting in its priority (or `scheduled` with `delay_ms`, or
    without it for the job's `backoff`), or to
    `dead` when `dead` is true or its attempts reach `max_attempts`.

    Args:
        queue (str):
        id (str):
        body (NackRequest): Give a job back without success. Example: {'dead': False, 'delay_ms':
            0, 'error': 'timeout talking to SMTP', 'lease_token': '…'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobView | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    id: str,
    *,
    client: AuthenticatedClient,
    body: NackRequest,
) -> JobView | Problem | None:
    """Nack a job.

     `attempts` goes up by one; the job goes back to `pending` behind the jobs
    already waiting in its priority (or `scheduled` with `delay_ms`, or
    without it for the job's `backoff`), or to
    `dead` when `dead` is true or its attempts reach `max_attempts`.

    Args:
        queue (str):
        id (str):
        body (NackRequest): Give a job back without success. Example: {'dead': False, 'delay_ms':
            0, 'error': 'timeout talking to SMTP', 'lease_token': '…'}.

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
            body=body,
        )
    ).parsed
