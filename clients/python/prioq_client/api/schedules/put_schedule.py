from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.schedule_request import ScheduleRequest
from ...models.schedule_view import ScheduleView
from ...types import Response


def _get_kwargs(
    queue: str,
    name: str,
    *,
    body: ScheduleRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/queues/{queue}/schedules/{name}".format(
            queue=quote(str(queue), safe=""),
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | ScheduleView | None:
    if response.status_code == 200:
        response_200 = ScheduleView.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = ScheduleView.from_dict(response.json())

        return response_201

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

    if response.status_code == 507:
        response_507 = Problem.from_dict(response.json())

        return response_507

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | ScheduleView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    queue: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: ScheduleRequest,
) -> Response[Problem | ScheduleView]:
    """Create or replace a schedule.

     It fires next at its first fire time after now (none while paused); a
    replaced schedule keeps its last run. Each fire time enqueues one job,
    fleet-wide, with id `{name}:{fire time in ms}`.

    Args:
        queue (str):
        name (str):
        body (ScheduleRequest): A schedule: a cron pattern in a time zone, and the job each of its
            fire
            times enqueues. Example: {'args': {'kind': 'daily'}, 'cron': '*/5 * * * *', 'group': None,
            'max_attempts': 5, 'paused': False, 'priority': 1, 'retain_ms': 0, 'task': 'report',
            'timezone': 'Europe/Berlin'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: ScheduleRequest,
) -> Problem | ScheduleView | None:
    """Create or replace a schedule.

     It fires next at its first fire time after now (none while paused); a
    replaced schedule keeps its last run. Each fire time enqueues one job,
    fleet-wide, with id `{name}:{fire time in ms}`.

    Args:
        queue (str):
        name (str):
        body (ScheduleRequest): A schedule: a cron pattern in a time zone, and the job each of its
            fire
            times enqueues. Example: {'args': {'kind': 'daily'}, 'cron': '*/5 * * * *', 'group': None,
            'max_attempts': 5, 'paused': False, 'priority': 1, 'retain_ms': 0, 'task': 'report',
            'timezone': 'Europe/Berlin'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScheduleView
    """

    return sync_detailed(
        queue=queue,
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    queue: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: ScheduleRequest,
) -> Response[Problem | ScheduleView]:
    """Create or replace a schedule.

     It fires next at its first fire time after now (none while paused); a
    replaced schedule keeps its last run. Each fire time enqueues one job,
    fleet-wide, with id `{name}:{fire time in ms}`.

    Args:
        queue (str):
        name (str):
        body (ScheduleRequest): A schedule: a cron pattern in a time zone, and the job each of its
            fire
            times enqueues. Example: {'args': {'kind': 'daily'}, 'cron': '*/5 * * * *', 'group': None,
            'max_attempts': 5, 'paused': False, 'priority': 1, 'retain_ms': 0, 'task': 'report',
            'timezone': 'Europe/Berlin'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: ScheduleRequest,
) -> Problem | ScheduleView | None:
    """Create or replace a schedule.

     It fires next at its first fire time after now (none while paused); a
    replaced schedule keeps its last run. Each fire time enqueues one job,
    fleet-wide, with id `{name}:{fire time in ms}`.

    Args:
        queue (str):
        name (str):
        body (ScheduleRequest): A schedule: a cron pattern in a time zone, and the job each of its
            fire
            times enqueues. Example: {'args': {'kind': 'daily'}, 'cron': '*/5 * * * *', 'group': None,
            'max_attempts': 5, 'paused': False, 'priority': 1, 'retain_ms': 0, 'task': 'report',
            'timezone': 'Europe/Berlin'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScheduleView
    """

    return (
        await asyncio_detailed(
            queue=queue,
            name=name,
            client=client,
            body=body,
        )
    ).parsed
