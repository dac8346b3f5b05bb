from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.ack_many_request import AckManyRequest
from ...models.ack_many_response import AckManyResponse
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    queue: str,
    *,
    body: AckManyRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/queues/{queue}/ack".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AckManyResponse | Problem | None:
    if response.status_code == 200:
        response_200 = AckManyResponse.from_dict(response.json())

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
) -> Response[AckManyResponse | Problem]:
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
    body: AckManyRequest,
) -> Response[AckManyResponse | Problem]:
    """Acknowledge many jobs.

     Each entry follows the single-ack rules on its own.

    Args:
        queue (str):
        body (AckManyRequest): Many acknowledgements. Example: {'jobs': [{'id': 'order-1234',
            'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1'}, {'id': 'order-1235', 'lease_token':
            '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AckManyResponse | Problem]
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
    body: AckManyRequest,
) -> AckManyResponse | Problem | None:
    """Acknowledge many jobs.

     Each entry follows the single-ack rules on its own.

    Args:
        queue (str):
        body (AckManyRequest): Many acknowledgements. Example: {'jobs': [{'id': 'order-1234',
            'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1'}, {'id': 'order-1235', 'lease_token':
            '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AckManyResponse | Problem
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
    body: AckManyRequest,
) -> Response[AckManyResponse | Problem]:
    """Acknowledge many jobs.

     Each entry follows the single-ack rules on its own.

    Args:
        queue (str):
        body (AckManyRequest): Many acknowledgements. Example: {'jobs': [{'id': 'order-1234',
            'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1'}, {'id': 'order-1235', 'lease_token':
            '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AckManyResponse | Problem]
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
    body: AckManyRequest,
) -> AckManyResponse | Problem | None:
    """Acknowledge many jobs.

     Each entry follows the single-ack rules on its own.

    Args:
        queue (str):
        body (AckManyRequest): Many acknowledgements. Example: {'jobs': [{'id': 'order-1234',
            'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1'}, {'id': 'order-1235', 'lease_token':
            '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AckManyResponse | Problem
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            body=body,
        )
    ).parsed
