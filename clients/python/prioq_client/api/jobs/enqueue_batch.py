from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.enqueue_batch_request import EnqueueBatchRequest
from ...models.job_list import JobList
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    queue: str,
    *,
    body: EnqueueBatchRequest,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(traceparent, Unset):
        headers["traceparent"] = traceparent

    if not isinstance(tracestate, Unset):
        headers["tracestate"] = tracestate

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/queues/{queue}/jobs/batch".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> JobList | Problem | None:
    if response.status_code == 200:
        response_200 = JobList.from_dict(response.json())

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

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[JobList | Problem]:
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
    body: EnqueueBatchRequest,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> Response[JobList | Problem]:
    """Enqueue many jobs at once.

     All or nothing: one invalid job answers 422 naming its index and nothing
    is added. A client id repeated in one batch creates one job.

    Args:
        queue (str):
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (EnqueueBatchRequest): Many jobs to add at once. Example: {'jobs': [{'args': {'to':
            'a@example.com'}, 'id': 'order-1234', 'priority': 0, 'task': 'send_email'}, {'priority':
            9, 'task': 'nightly_digest'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobList | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: EnqueueBatchRequest,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> JobList | Problem | None:
    """Enqueue many jobs at once.

     All or nothing: one invalid job answers 422 naming its index and nothing
    is added. A client id repeated in one batch creates one job.

    Args:
        queue (str):
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (EnqueueBatchRequest): Many jobs to add at once. Example: {'jobs': [{'args': {'to':
            'a@example.com'}, 'id': 'order-1234', 'priority': 0, 'task': 'send_email'}, {'priority':
            9, 'task': 'nightly_digest'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobList | Problem
    """

    return sync_detailed(
        queue=queue,
        client=client,
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    ).parsed


async def asyncio_detailed(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: EnqueueBatchRequest,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> Response[JobList | Problem]:
    """Enqueue many jobs at once.

     All or nothing: one invalid job answers 422 naming its index and nothing
    is added. A client id repeated in one batch creates one job.

    Args:
        queue (str):
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (EnqueueBatchRequest): Many jobs to add at once. Example: {'jobs': [{'args': {'to':
            'a@example.com'}, 'id': 'order-1234', 'priority': 0, 'task': 'send_email'}, {'priority':
            9, 'task': 'nightly_digest'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobList | Problem]
    """

    kwargs = _get_kwargs(
        queue=queue,
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    queue: str,
    *,
    client: AuthenticatedClient,
    body: EnqueueBatchRequest,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> JobList | Problem | None:
    """Enqueue many jobs at once.

     All or nothing: one invalid job answers 422 naming its index and nothing
    is added. A client id repeated in one batch creates one job.

    Args:
        queue (str):
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (EnqueueBatchRequest): Many jobs to add at once. Example: {'jobs': [{'args': {'to':
            'a@example.com'}, 'id': 'order-1234', 'priority': 0, 'task': 'send_email'}, {'priority':
            9, 'task': 'nightly_digest'}]}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobList | Problem
    """

    return (
        await asyncio_detailed(
            queue=queue,
            client=client,
            body=body,
            traceparent=traceparent,
            tracestate=tracestate,
        )
    ).parsed
