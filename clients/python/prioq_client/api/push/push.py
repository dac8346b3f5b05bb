from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.push_view import PushView
from ...types import Response


def _get_kwargs(
    queue: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/queues/{queue}/push".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | PushView | None:
    if response.status_code == 200:
        response_200 = PushView.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | PushView]:
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
) -> Response[Problem | PushView]:
    """Read a queue's push target and its health.

     404 when the queue has none. The signatures' secret is not shown.

    Args:
        queue (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PushView]
    """

    kwargs = _get_kwargs(
        queue=queue,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    *,
    client: AuthenticatedClient,
) -> Problem | PushView | None:
    """Read a queue's push target and its health.

     404 when the queue has none. The signatures' secret is not shown.

    Args:
        queue (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | PushView
    """

    return sync_detailed(
        queue=queue,
        client=client,
    ).parsed


async def asyncio_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
) -> Response[Problem | PushView]:
    """Read a queue's push target and its health.

     404 when the queue has none. The signatures' secret is not shown.

    Args:
        queue (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PushView]
    """

    kwargs = _get_kwargs(
        queue=queue,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    *,
    client: AuthenticatedClient,
) -> Problem | PushView | None:
    """Read a queue's push target and its health.

     404 when the queue has none. The signatures' secret is not shown.

    Args:
        queue (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | PushView
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
        )
    ).parsed
