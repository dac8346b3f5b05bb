from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.settings_patch import SettingsPatch
from ...models.settings_view import SettingsView
from ...types import Response


def _get_kwargs(
    queue: str,
    *,
    body: SettingsPatch,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/queues/{queue}/settings".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/merge-patch+json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | SettingsView | None:
    if response.status_code == 200:
        response_200 = SettingsView.from_dict(response.json())

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

    if response.status_code == 507:
        response_507 = Problem.from_dict(response.json())

        return response_507

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | SettingsView]:
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
    body: SettingsPatch,
) -> Response[Problem | SettingsView]:
    """Change a queue's settings.

     A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
    or `application/json`: fields left out stay, `null` resets a field to
    its default. Every instance applies the change to its next claim. An
    unknown field or a value out of range answers 422 naming it, and
    nothing changes. `shards` changes only while the queue holds no job in
    any state; otherwise 409 `conflict`, and nothing changes.

    Args:
        queue (str):
        body (SettingsPatch): A JSON merge patch of the settings: a field left out stays as it is,
            `null` resets it to its default. Example: {'group_weights': {'tenant-42': 5, 'tenant-7':
            None}, 'max_in_flight': 200, 'rate_limit': {'burst': 50, 'per_second': 50.0}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SettingsView]
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
    body: SettingsPatch,
) -> Problem | SettingsView | None:
    """Change a queue's settings.

     A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
    or `application/json`: fields left out stay, `null` resets a field to
    its default. Every instance applies the change to its next claim. An
    unknown field or a value out of range answers 422 naming it, and
    nothing changes. `shards` changes only while the queue holds no job in
    any state; otherwise 409 `conflict`, and nothing changes.

    Args:
        queue (str):
        body (SettingsPatch): A JSON merge patch of the settings: a field left out stays as it is,
            `null` resets it to its default. Example: {'group_weights': {'tenant-42': 5, 'tenant-7':
            None}, 'max_in_flight': 200, 'rate_limit': {'burst': 50, 'per_second': 50.0}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SettingsView
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
    body: SettingsPatch,
) -> Response[Problem | SettingsView]:
    """Change a queue's settings.

     A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
    or `application/json`: fields left out stay, `null` resets a field to
    its default. Every instance applies the change to its next claim. An
    unknown field or a value out of range answers 422 naming it, and
    nothing changes. `shards` changes only while the queue holds no job in
    any state; otherwise 409 `conflict`, and nothing changes.

    Args:
        queue (str):
        body (SettingsPatch): A JSON merge patch of the settings: a field left out stays as it is,
            `null` resets it to its default. Example: {'group_weights': {'tenant-42': 5, 'tenant-7':
            None}, 'max_in_flight': 200, 'rate_limit': {'burst': 50, 'per_second': 50.0}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SettingsView]
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
    body: SettingsPatch,
) -> Problem | SettingsView | None:
    """Change a queue's settings.

     A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
    or `application/json`: fields left out stay, `null` resets a field to
    its default. Every instance applies the change to its next claim. An
    unknown field or a value out of range answers 422 naming it, and
    nothing changes. `shards` changes only while the queue holds no job in
    any state; otherwise 409 `conflict`, and nothing changes.

    Args:
        queue (str):
        body (SettingsPatch): A JSON merge patch of the settings: a field left out stays as it is,
            `null` resets it to its default. Example: {'group_weights': {'tenant-42': 5, 'tenant-7':
            None}, 'max_in_flight': 200, 'rate_limit': {'burst': 50, 'per_second': 50.0}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SettingsView
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            body=body,
        )
    ).parsed
