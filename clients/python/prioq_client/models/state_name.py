from enum import StrEnum


class StateName(StrEnum):
    COMPLETED = "completed"
    DEAD = "dead"
    PENDING = "pending"
    PROCESSING = "processing"
    SCHEDULED = "scheduled"

    def __str__(self) -> str:
        return str(self.value)
