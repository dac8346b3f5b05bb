from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.search_page_view import SearchPageView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    queue: str,
    *,
    id: str | Unset = UNSET,
    task: str | Unset = UNSET,
    group: str | Unset = UNSET,
    dedup_key: str | Unset = UNSET,
    field: str | Unset = UNSET,
    value: str | Unset = UNSET,
    state: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["id"] = id

    params["task"] = task

    params["group"] = group

    params["dedup_key"] = dedup_key

    params["field"] = field

    params["value"] = value

    params["state"] = state

    params["limit"] = limit

    params["cursor"] = cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/queues/{queue}/jobs".format(
            queue=quote(str(queue), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | SearchPageView | None:
    if response.status_code == 200:
        response_200 = SearchPageView.from_dict(response.json())

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | SearchPageView]:
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
    id: str | Unset = UNSET,
    task: str | Unset = UNSET,
    group: str | Unset = UNSET,
    dedup_key: str | Unset = UNSET,
    field: str | Unset = UNSET,
    value: str | Unset = UNSET,
    state: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[Problem | SearchPageView]:
    """Find jobs.

     A queue's jobs in any state (pending, scheduled, processing, dead,
    completed, cancelled, waiting) that match every filter given: a part
    of the id, the task, the group, the dedup key held, a top-level field
    of the args (`field` and `value`), the state. Without filters, every
    job. A page is a step of a scan of the queue's jobs: about `limit`
    jobs, in no order; a job that changes state meanwhile may be seen
    twice or missed, as by any scan. Redis looks at up to 1,000 jobs a
    call, and a page at up to 10,000.

    Args:
        queue (str):
        id (str | Unset):
        task (str | Unset):
        group (str | Unset):
        dedup_key (str | Unset):
        field (str | Unset):
        value (str | Unset):
        state (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SearchPageView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        task=task,
        group=group,
        dedup_key=dedup_key,
        field=field,
        value=value,
        state=state,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    *,
    client: AuthenticatedClient,
    id: str | Unset = UNSET,
    task: str | Unset = UNSET,
    group: str | Unset = UNSET,
    dedup_key: str | Unset = UNSET,
    field: str | Unset = UNSET,
    value: str | Unset = UNSET,
    state: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Problem | SearchPageView | None:
    """Find jobs.

     A queue's jobs in any state (pending, scheduled, processing, dead,
    completed, cancelled, waiting) that match every filter given: a part
    of the id, the task, the group, the dedup key held, a top-level field
    of the args (`field` and `value`), the state. Without filters, every
    job. A page is a step of a scan of the queue's jobs: about `limit`
    jobs, in no order; a job that changes state meanwhile may be seen
    twice or missed, as by any scan. Redis looks at up to 1,000 jobs a
    call, and a page at up to 10,000.

    Args:
        queue (str):
        id (str | Unset):
        task (str | Unset):
        group (str | Unset):
        dedup_key (str | Unset):
        field (str | Unset):
        value (str | Unset):
        state (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SearchPageView
    """

    return sync_detailed(
        queue=queue,
        client=client,
        id=id,
        task=task,
        group=group,
        dedup_key=dedup_key,
        field=field,
        value=value,
        state=state,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
    id: str | Unset = UNSET,
    task: str | Unset = UNSET,
    group: str | Unset = UNSET,
    dedup_key: str | Unset = UNSET,
    field: str | Unset = UNSET,
    value: str | Unset = UNSET,
    state: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[Problem | SearchPageView]:
    """Find jobs.

     A queue's jobs in any state (pending, scheduled, processing, dead,
    completed, cancelled, waiting) that match every filter given: a part
    of the id, the task, the group, the dedup key held, a top-level field
    of the args (`field` and `value`), the state. Without filters, every
    job. A page is a step of a scan of the queue's jobs: about `limit`
    jobs, in no order; a job that changes state meanwhile may be seen
    twice or missed, as by any scan. Redis looks at up to 1,000 jobs a
    call, and a page at up to 10,000.

    Args:
        queue (str):
        id (str | Unset):
        task (str | Unset):
        group (str | Unset):
        dedup_key (str | Unset):
        field (str | Unset):
        value (str | Unset):
        state (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SearchPageView]
    """

    kwargs = _get_kwargs(
        queue=queue,
        id=id,
        task=task,
        group=group,
        dedup_key=dedup_key,
        field=field,
        value=value,
        state=state,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    *,
    client: AuthenticatedClient,
    id: str | Unset = UNSET,
    task: str | Unset = UNSET,
    group: str | Unset = UNSET,
    dedup_key: str | Unset = UNSET,
    field: str | Unset = UNSET,
    value: str | Unset = UNSET,
    state: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Problem | SearchPageView | None:
    """Find jobs.

     A queue's jobs in any state (pending, scheduled, processing, dead,
    completed, cancelled, waiting) that match every filter given: a part
    of the id, the task, the group, the dedup key held, a top-level field
    of the args (`field` and `value`), the state. Without filters, every
    job. A page is a step of a scan of the queue's jobs: about `limit`
    jobs, in no order; a job that changes state meanwhile may be seen
    twice or missed, as by any scan. Redis looks at up to 1,000 jobs a
    call, and a page at up to 10,000.

    Args:
        queue (str):
        id (str | Unset):
        task (str | Unset):
        group (str | Unset):
        dedup_key (str | Unset):
        field (str | Unset):
        value (str | Unset):
        state (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SearchPageView
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            id=id,
            task=task,
            group=group,
            dedup_key=dedup_key,
            field=field,
            value=value,
            state=state,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
