from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.scale_view import ScaleView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    queue: str,
    *,
    per_worker: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["per_worker"] = per_worker

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/queues/{queue}/scale".format(
            queue=quote(str(queue), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | ScaleView | None:
    if response.status_code == 200:
        response_200 = ScaleView.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | ScaleView]:
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
    per_worker: int | Unset = UNSET,
) -> Response[Problem | ScaleView]:
    """A queue's load, for autoscalers.

     A queue never used answers with zeros.

    Args:
        queue (str):
        per_worker (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScaleView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        per_worker=per_worker,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    *,
    client: AuthenticatedClient,
    per_worker: int | Unset = UNSET,
) -> Problem | ScaleView | None:
    """A queue's load, for autoscalers.

     A queue never used answers with zeros.

    Args:
        queue (str):
        per_worker (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScaleView
    """

    return sync_detailed(
        queue=queue,
        client=client,
        per_worker=per_worker,
    ).parsed


async def asyncio_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
    per_worker: int | Unset = UNSET,
) -> Response[Problem | ScaleView]:
    """A queue's load, for autoscalers.

     A queue never used answers with zeros.

    Args:
        queue (str):
        per_worker (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScaleView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        per_worker=per_worker,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    *,
    client: AuthenticatedClient,
    per_worker: int | Unset = UNSET,
) -> Problem | ScaleView | None:
    """A queue's load, for autoscalers.

     A queue never used answers with zeros.

    Args:
        queue (str):
        per_worker (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScaleView
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            per_worker=per_worker,
        )
    ).parsed
