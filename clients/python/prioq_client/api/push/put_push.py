from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.push_request import PushRequest
from ...models.push_view import PushView
from ...types import Response


def _get_kwargs(
    queue: str,
    *,
    body: PushRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/queues/{queue}/push".format(
            queue=quote(str(queue), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | PushView | None:
    if response.status_code == 200:
        response_200 = PushView.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = PushView.from_dict(response.json())

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
    body: PushRequest,
) -> Response[Problem | PushView]:
    """Set a queue's push target.

     From then on prioq's instances (this one at once, the others from
    their next sweep of the queue) claim the queue's jobs, at most
    `concurrency` at once across all of them, and POST each to `url` as
    JSON (`queue`, `lease_token`, `fence` and `job`, the job's view), with
    the headers `prioq-signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256
    of "<t>.<body>" under the secret>`), `prioq-queue`, `prioq-job-id`,
    `prioq-attempt`, `prioq-fence` and the job's `traceparent`. A 2xx
    answer acks the job (a JSON body is its result); 429 and 503 nack it
    with their `Retry-After`; any other answer, none within `timeout_ms`,
    or a failed connection nacks it with the error. Replacing a target
    keeps its health. The answer shows the secret.

    Args:
        queue (str):
        body (PushRequest): Where and how to push a queue's jobs. Example: {'concurrency': 8,
            'timeout_ms': 30000, 'url': 'https://billing.internal/jobs'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PushView]
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
    body: PushRequest,
) -> Problem | PushView | None:
    """Set a queue's push target.

     From then on prioq's instances (this one at once, the others from
    their next sweep of the queue) claim the queue's jobs, at most
    `concurrency` at once across all of them, and POST each to `url` as
    JSON (`queue`, `lease_token`, `fence` and `job`, the job's view), with
    the headers `prioq-signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256
    of "<t>.<body>" under the secret>`), `prioq-queue`, `prioq-job-id`,
    `prioq-attempt`, `prioq-fence` and the job's `traceparent`. A 2xx
    answer acks the job (a JSON body is its result); 429 and 503 nack it
    with their `Retry-After`; any other answer, none within `timeout_ms`,
    or a failed connection nacks it with the error. Replacing a target
    keeps its health. The answer shows the secret.

    Args:
        queue (str):
        body (PushRequest): Where and how to push a queue's jobs. Example: {'concurrency': 8,
            'timeout_ms': 30000, 'url': 'https://billing.internal/jobs'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | PushView
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
    body: PushRequest,
) -> Response[Problem | PushView]:
    """Set a queue's push target.

     From then on prioq's instances (this one at once, the others from
    their next sweep of the queue) claim the queue's jobs, at most
    `concurrency` at once across all of them, and POST each to `url` as
    JSON (`queue`, `lease_token`, `fence` and `job`, the job's view), with
    the headers `prioq-signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256
    of "<t>.<body>" under the secret>`), `prioq-queue`, `prioq-job-id`,
    `prioq-attempt`, `prioq-fence` and the job's `traceparent`. A 2xx
    answer acks the job (a JSON body is its result); 429 and 503 nack it
    with their `Retry-After`; any other answer, none within `timeout_ms`,
    or a failed connection nacks it with the error. Replacing a target
    keeps its health. The answer shows the secret.

    Args:
        queue (str):
        body (PushRequest): Where and how to push a queue's jobs. Example: {'concurrency': 8,
            'timeout_ms': 30000, 'url': 'https://billing.internal/jobs'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | PushView]
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
    body: PushRequest,
) -> Problem | PushView | None:
    """Set a queue's push target.

     From then on prioq's instances (this one at once, the others from
    their next sweep of the queue) claim the queue's jobs, at most
    `concurrency` at once across all of them, and POST each to `url` as
    JSON (`queue`, `lease_token`, `fence` and `job`, the job's view), with
    the headers `prioq-signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256
    of "<t>.<body>" under the secret>`), `prioq-queue`, `prioq-job-id`,
    `prioq-attempt`, `prioq-fence` and the job's `traceparent`. A 2xx
    answer acks the job (a JSON body is its result); 429 and 503 nack it
    with their `Retry-After`; any other answer, none within `timeout_ms`,
    or a failed connection nacks it with the error. Replacing a target
    keeps its health. The answer shows the secret.

    Args:
        queue (str):
        body (PushRequest): Where and how to push a queue's jobs. Example: {'concurrency': 8,
            'timeout_ms': 30000, 'url': 'https://billing.internal/jobs'}.

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
            body=body,
        )
    ).parsed
