from enum import StrEnum


class DependencyState(StrEnum):
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    DEAD = "dead"
    DELETED = "deleted"

    def __str__(self) -> str:
        return str(self.value)
