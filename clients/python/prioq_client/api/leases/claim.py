from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.claim_request import ClaimRequest
from ...models.claim_response import ClaimResponse
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    queue: str,
    *,
    body: ClaimRequest | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/queues/{queue}/claim".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ClaimResponse | Problem | None:
    if response.status_code == 200:
        response_200 = ClaimResponse.from_dict(response.json())

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ClaimResponse | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: ClaimRequest | Unset = UNSET,
) -> Response[ClaimResponse | Problem]:
    """Claim jobs.

     Leases up to `max_jobs` jobs, most urgent first and oldest first inside
    a priority, except for the bulk floor's share, which takes the oldest
    job of the least urgent priority. With `wait_ms` the request waits for a
    job to become claimable. An empty list means nothing was claimable.
    With `ack`, those jobs are acknowledged first, in the same step when no
    wait is needed, and before any wait begins.

    Args:
        queue (str):
        body (ClaimRequest | Unset): How to claim; every field is optional. Example: {'ack':
            [{'id': 'order-1233', 'lease_token': '4fJ2kX9qLm0aB7cD1eF3gH-1'}], 'lease_ms': 60000,
            'max_jobs': 1, 'wait_ms': 0, 'worker': 'billing-7'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ClaimResponse | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: ClaimRequest | Unset = UNSET,
) -> ClaimResponse | Problem | None:
    """Claim jobs.

     Leases up to `max_jobs` jobs, most urgent first and oldest first inside
    a priority, except for the bulk floor's share, which takes the oldest
    job of the least urgent priority. With `wait_ms` the request waits for a
    job to become claimable. An empty list means nothing was claimable.
    With `ack`, those jobs are acknowledged first, in the same step when no
    wait is needed, and before any wait begins.

    Args:
        queue (str):
        body (ClaimRequest | Unset): How to claim; every field is optional. Example: {'ack':
            [{'id': 'order-1233', 'lease_token': '4fJ2kX9qLm0aB7cD1eF3gH-1'}], 'lease_ms': 60000,
            'max_jobs': 1, 'wait_ms': 0, 'worker': 'billing-7'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ClaimResponse | Problem
    """

    return sync_detailed(
        queue=queue,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: ClaimRequest | Unset = UNSET,
) -> Response[ClaimResponse | Problem]:
    """Claim jobs.

     Leases up to `max_jobs` jobs, most urgent first and oldest first inside
    a priority, except for the bulk floor's share, which takes the oldest
    job of the least urgent priority. With `wait_ms` the request waits for a
    job to become claimable. An empty list means nothing was claimable.
    With `ack`, those jobs are acknowledged first, in the same step when no
    wait is needed, and before any wait begins.

    Args:
        queue (str):
        body (ClaimRequest | Unset): How to claim; every field is optional. Example: {'ack':
            [{'id': 'order-1233', 'lease_token': '4fJ2kX9qLm0aB7cD1eF3gH-1'}], 'lease_ms': 60000,
            'max_jobs': 1, 'wait_ms': 0, 'worker': 'billing-7'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ClaimResponse | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: ClaimRequest | Unset = UNSET,
) -> ClaimResponse | Problem | None:
    """Claim jobs.

     Leases up to `max_jobs` jobs, most urgent first and oldest first inside
    a priority, except for the bulk floor's share, which takes the oldest
    job of the least urgent priority. With `wait_ms` the request waits for a
    job to become claimable. An empty list means nothing was claimable.
    With `ack`, those jobs are acknowledged first, in the same step when no
    wait is needed, and before any wait begins.

    Args:
        queue (str):
        body (ClaimRequest | Unset): How to claim; every field is optional. Example: {'ack':
            [{'id': 'order-1233', 'lease_token': '4fJ2kX9qLm0aB7cD1eF3gH-1'}], 'lease_ms': 60000,
            'max_jobs': 1, 'wait_ms': 0, 'worker': 'billing-7'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ClaimResponse | Problem
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            body=body,
        )
    ).parsed
