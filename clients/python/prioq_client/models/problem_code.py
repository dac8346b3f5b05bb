from enum import StrEnum


class ProblemCode(StrEnum):
    BACKEND_FULL = "backend_full"
    BACKEND_UNAVAILABLE = "backend_unavailable"
    CONFLICT = "conflict"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    INTERNAL_ERROR = "internal_error"
    INVALID_REQUEST = "invalid_request"
    LEASE_LOST = "lease_lost"
    LIMIT_REACHED = "limit_reached"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_FOUND = "not_found"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    QUEUE_FULL = "queue_full"
    UNAUTHORIZED = "unauthorized"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    VALIDATION_FAILED = "validation_failed"

    def __str__(self) -> str:
        return str(self.value)
