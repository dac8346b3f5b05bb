from enum import StrEnum


class StateName(StrEnum):
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    DEAD = "dead"
    PENDING = "pending"
    PROCESSING = "processing"
    SCHEDULED = "scheduled"
    WAITING = "waiting"

    def __str__(self) -> str:
        return str(self.value)
